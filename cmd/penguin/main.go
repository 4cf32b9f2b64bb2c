// Command penguin is the one binary of Penguin, a context engine for AI
// agents: it runs the llm, environment and engine gRPC services, together
// or apart, and it is their command-line client.
//
// The command line is parsed by cobra: flags go anywhere on the line, every
// command's help has one layout, `penguin completion` writes shell
// completion scripts, and every flag falls back to its PENGUIN_* variable
// (see internal/config). This file builds the command tree and maps errors
// to exit statuses; each command lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a graceful stop; restoring the default
	// handlers then lets a second one end the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses of the command itself; `penguin run` adds the task's own
// (see cli.ExitAborted).
const (
	exitFailed = 1
	// exitUsage is for a command line that is wrong, as getopt-style tools
	// and shells use it.
	exitUsage = 2
)

// unparsedFlags are the flags no environment variable sets.
var unparsedFlags = []string{"help", "version"}

// execute runs the command line args and returns the process exit status.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The trampoline of confined commands has an exact argv contract of its
	// own (see package sandbox): it is never parsed here.
	if len(args) > 0 && args[0] == sandbox.SubcommandName {
		return sandboxExec(ctx, args[1:], stderr)
	}
	root := newRoot(args)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	var exit *exitError
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintf(stderr, "penguin: %s\n", exit.msg)
		}
		return exit.code
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "penguin: %v\n", err)
		if usage.showUsage {
			fmt.Fprintln(stderr)
			cmd.SetOut(stderr)
			_ = cmd.Usage()
		} else {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "penguin: %v\n", err)
		return exitFailed
	}
}

// newRoot builds the command tree for the command line args. A server's
// (`penguin serve …`) has the serve command alone under the root: the
// other commands and their flags are nearly three quarters of the tree
// (3,129 of its 4,341 allocations, 349 of its 476 KB; about 1 ms of the
// 1.4 ms it took to build), which a server's cold start would wait for,
// and nothing of them is reachable from a command line that names serve
// first.
func newRoot(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "penguin",
		Short: "Penguin is a context engine for AI agents.",
		Long: `Penguin is a context engine for AI agents: the llm, environment and engine
gRPC services, together or apart, and their command-line client.

Every flag can also be set through a PENGUIN_* environment variable named
after it: --auth-token-file through PENGUIN_AUTH_TOKEN_FILE, and so on.`,
		Version:       versionString(),
		Args:          unknownCommand,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bare `penguin` is a command line missing its command.
			return &usageError{err: errors.New("name a command"), showUsage: true}
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := config.ApplyEnv(cmd.Flags(), os.LookupEnv, unparsedFlags...); err != nil {
				return &usageError{err: err}
			}
			return nil
		},
	}
	root.SetVersionTemplate("penguin {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.AddCommand(newServeCmd())
	if len(args) == 0 || args[0] != serveCommand {
		root.AddCommand(newRunCmd(), newChatCmd(), newSessionsCmd(), newModelsCmd(), newProvidersCmd(), newAgentsCmd(), newConfigCmd(), newSkillsCmd(), newMemoryCmd(), newVaultCmd(), newToolsCmd(), newModelSettingsCmd(), newMCPCmd(), newSchedulesCmd(), newMockLLMCmd(), newVersionCmd(),
			newLoginCmd(), newLogoutCmd(), newUsersCmd(), newProjectsCmd(), newTokensCmd(), newAuditCmd())
		root.AddCommand(newWhoAmICmd()...)
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.Flags().BoolP("version", "v", false, "print the version")
	finishHelp(root)
	return root
}

// finishHelp gives every command's help the same shape: flags in the
// order they were defined (a command's own before the embedded server's),
// each naming its PENGUIN_* variable.
func finishHelp(c *cobra.Command) {
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
		fs.SortFlags = false
		config.DocumentEnv(fs, unparsedFlags...)
	}
	for _, sub := range c.Commands() {
		finishHelp(sub)
	}
}

// unknownCommand is the Args check of a command that takes subcommands
// but no arguments of its own: an argument is a misspelt subcommand.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		name := strings.TrimSpace(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()) + " " + args[0])
		return &usageError{err: fmt.Errorf("unknown command %q", name), showUsage: true}
	}
	return nil
}

// noArgs is the Args check of a command that takes no arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s: unexpected arguments %q", cmd.Name(), args)
	}
	return nil
}

// usageError is a command line that is wrong: exit status 2, and a pointer
// to the command's help (or the usage itself, for a missing command).
type usageError struct {
	err       error
	showUsage bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitError carries an exit status other than 1 out of a command, for
// `penguin run`, whose status tells scripts how the task ended.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// completeWords completes a flag's value from a fixed list.
func completeWords(words ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp)
}

// mustComplete registers a completion for a flag that this file defined;
// a misspelt name is a programming error.
func mustComplete(cmd *cobra.Command, name string, f cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(name, f); err != nil {
		panic(err)
	}
}
