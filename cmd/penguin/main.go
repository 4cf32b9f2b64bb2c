// Command penguin is the one binary of Penguin, a context engine for AI
// agents: it runs the llm, environment and engine gRPC services, together
// or apart, and it is their command-line client.
//
// This file only dispatches: each subcommand lives in its own file, as a
// function that takes the process context and the arguments after its name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a graceful stop; restoring the default
	// handlers then lets a second one end the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand as the usage text shows it.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands lists the subcommands in the order the usage text shows them.
func commands() []command {
	return []command{
		{"serve", "run the llm, environment and engine services in one process", serveAll},
		{"serve llm", "run the llm service (model gateway) alone", serveLLM},
		{"serve environment", "run the environment service (workspaces and tools) alone", serveEnvironment},
		{"serve engine", "run the engine service (agent loop and sessions) alone", serveEngine},
		{"run", "send one message to an agent, run the task to its end, exit", runTask},
		{"chat", "talk to an agent interactively", chat},
		{"sessions", "list, show, export and delete sessions", sessions},
		{"models", "print the model catalog: limits, reasoning levels, prices", models},
		{"mockllm", "serve a scripted stand-in for a model provider, for tests and demos", mockLLM},
		{"version", "print the version", nil},
		{"help", "print this help", nil},
	}
}

// dispatch executes the command line args and returns the process exit code:
// 0 on success, 1 when the command failed, 2 when the command line itself
// is wrong.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "sandbox-exec": // hidden: the trampoline of confined commands, see sandbox_exec.go
		return sandboxExec(ctx, args[1:], stderr)
	case "version", "-v", "-version", "--version":
		fmt.Fprintf(stdout, "penguin %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	}

	name, rest := args[0], args[1:]
	if name == "serve" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = "serve "+rest[0], rest[1:]
	}
	for _, c := range commands() {
		if c.name != name || c.run == nil {
			continue
		}
		err := c.run(ctx, rest)
		var exit *exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &exit):
			if exit.msg != "" {
				fmt.Fprintf(stderr, "penguin: %s\n", exit.msg)
			}
			return exit.code
		default:
			fmt.Fprintf(stderr, "penguin: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "penguin: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Penguin is a context engine for AI agents.

Usage:
  penguin <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-19s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "penguin <command> -h" for a command's flags. Every flag can also be
set through a PENGUIN_* environment variable: --auth-token-file through
PENGUIN_AUTH_TOKEN_FILE, and so on.
`)
}
