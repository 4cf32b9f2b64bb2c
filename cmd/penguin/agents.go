package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The agent commands: penguin agents, config, skills, memory, vault,
// tools and mcp, each one AgentService call (config edit a read, an editor and a
// write) against --engine or the embedded server over the same data
// directory.

// agentCmd is what an agent command runs with: the connection's agent
// client, the project and agent its flags name, and where it writes.
type agentCmd struct {
	agents    penguinv1.AgentServiceClient
	schedules penguinv1.ScheduleServiceClient
	llm       penguinv1.LLMServiceClient
	project   string
	agent     string
	out       io.Writer
	in        *os.File
}

// agentGroup makes a command group whose subcommands each run f with a
// connected agentCmd; withAgent adds --agent.
func agentGroup(use, short string, withAgent bool, subs ...*cobra.Command) *cobra.Command {
	cmd, _ := agentGroupFlags(use, short, withAgent, subs...)
	return cmd
}

// agentGroupFlags is agentGroup, also returning the client flags the
// group's commands share, for a command added later that reads them
// itself.
func agentGroupFlags(use, short string, withAgent bool, subs ...*cobra.Command) (*cobra.Command, *clientFlags) {
	cmd := &cobra.Command{Use: use, Short: short, Args: unknownCommand}
	cf := addClientFlags(cmd.PersistentFlags())
	cf.embedded.llmOptional = true
	project := cmd.PersistentFlags().String("project", "", "the project (default: the default project)")
	agent := new(string)
	if withAgent {
		cmd.PersistentFlags().StringVar(agent, "agent", "default", "the agent")
	}
	for _, sub := range subs {
		run := sub.RunE
		sub.RunE = func(c *cobra.Command, args []string) error {
			conn, err := cf.connect(c.Context())
			if err != nil {
				return fmt.Errorf("%s: %w", use, err)
			}
			defer conn.Close()
			ac := &agentCmd{agents: conn.agents, schedules: conn.schedules, llm: conn.llm, project: *project, agent: *agent, out: os.Stdout, in: os.Stdin}
			c.SetContext(context.WithValue(c.Context(), agentCmdKey{}, ac))
			if err := run(c, args); err != nil {
				return fmt.Errorf("%s %s: %w", use, c.Name(), statusError(err))
			}
			return nil
		}
		cmd.AddCommand(sub)
	}
	return cmd, cf
}

type agentCmdKey struct{}

func ac(c *cobra.Command) *agentCmd { return c.Context().Value(agentCmdKey{}).(*agentCmd) }

// nArgs checks a command's argument count, min to max.
func nArgs(usage string, min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageErrorf("usage: %s", usage)
		}
		return nil
	}
}

func newAgentsCmd() *cobra.Command {
	from := new(string)
	create := &cobra.Command{Use: "create NAME", Short: "create an agent from the default template or --from another", Args: nArgs("penguin agents create NAME [--from AGENT]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.CreateAgent(c.Context(), &penguinv1.CreateAgentRequest{Project: a.project, Name: args[0], FromAgent: *from})
			return err
		}}
	create.Flags().StringVar(from, "from", "", "copy this agent (without its memory)")
	replace := new(bool)
	imp := &cobra.Command{Use: "import NAME FILE", Short: "create an agent from a tar.gz snapshot (or replace one's files with --replace)", Args: nArgs("penguin agents import NAME FILE.tar.gz [--replace]", 2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			data, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			resp, err := a.agents.ImportAgent(c.Context(), &penguinv1.ImportAgentRequest{Project: a.project, Agent: args[0], Archive: data, Replace: *replace})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "imported %d files into agent %s\n", resp.GetFiles(), args[0])
			return nil
		}}
	imp.Flags().BoolVar(replace, "replace", false, "replace the files (memory included) of an existing agent")
	return agentGroup("agents", "list, create, rename, delete, export and import agents", false,
		&cobra.Command{Use: "list", Short: "list the agents", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.agents.ListAgents(c.Context(), &penguinv1.ListAgentsRequest{Project: a.project})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tUPDATED")
			for _, ag := range resp.GetAgents() {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", ag.GetName(), ag.GetVersion(), ag.GetUpdatedAt().AsTime().Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		}},
		create,
		&cobra.Command{Use: "rename NAME NEW", Short: "rename an agent", Args: nArgs("penguin agents rename NAME NEW", 2, 2), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.RenameAgent(c.Context(), &penguinv1.RenameAgentRequest{Project: a.project, Agent: args[0], NewName: args[1]})
			return err
		}},
		&cobra.Command{Use: "delete NAME", Short: "delete an agent with all its files", Args: nArgs("penguin agents delete NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.DeleteAgent(c.Context(), &penguinv1.DeleteAgentRequest{Project: a.project, Agent: args[0]})
			return err
		}},
		&cobra.Command{Use: "export NAME [FILE]", Short: "write an agent as a tar.gz (default NAME.tar.gz)", Args: nArgs("penguin agents export NAME [FILE]", 1, 2), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.agents.ExportAgent(c.Context(), &penguinv1.ExportAgentRequest{Project: a.project, Agent: args[0]})
			if err != nil {
				return err
			}
			file := args[0] + ".tar.gz"
			if len(args) == 2 {
				file = args[1]
			}
			return os.WriteFile(file, resp.GetArchive(), 0o600)
		}},
		imp,
	)
}

func newConfigCmd() *cobra.Command {
	file := new(string)
	show := &cobra.Command{Use: "show", Short: "print system_config.yaml (or --file AGENTS.md)", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
		a := ac(c)
		resp, err := a.agents.GetAgentConfig(c.Context(), &penguinv1.GetAgentConfigRequest{Project: a.project, Agent: a.agent, File: *file})
		if err != nil {
			return err
		}
		_, err = io.WriteString(a.out, resp.GetContent())
		return err
	}}
	edit := &cobra.Command{Use: "edit", Short: "edit system_config.yaml (or --file AGENTS.md) in $EDITOR", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
		return ac(c).editConfig(c.Context(), *file)
	}}
	test := new(bool)
	model := &cobra.Command{Use: "model [PROVIDER/MODEL]", Short: "print the agent's default model, or set it (--test tries it first)", Args: nArgs("penguin config model [PROVIDER/MODEL] [--test]", 0, 1), RunE: func(c *cobra.Command, args []string) error {
		return ac(c).model(c.Context(), args, *test)
	}}
	model.Flags().BoolVar(test, "test", false, "send the model one short request (before setting it, or the current one)")
	cmd := agentGroup("config", "show and edit an agent's system_config.yaml, AGENTS.md and default model", true, show, edit, model)
	cmd.PersistentFlags().StringVar(file, "file", "system_config.yaml", "system_config.yaml or AGENTS.md")
	return cmd
}

// editConfig opens system_config.yaml or AGENTS.md in $EDITOR and
// writes it back with the version it was read at (editInEditor).
func (a *agentCmd) editConfig(ctx context.Context, file string) error {
	resp, err := a.agents.GetAgentConfig(ctx, &penguinv1.GetAgentConfigRequest{Project: a.project, Agent: a.agent, File: file})
	if err != nil {
		return err
	}
	return a.editInEditor(ctx, file, resp.GetContent(), func(body string) error {
		_, err := a.agents.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Project: a.project, Agent: a.agent, File: file, Content: body, Version: resp.GetVersion()})
		return err
	})
}

// editMemory opens a memory file (a new one when the scope lacks it) in
// $EDITOR and writes it back with the version it was read at.
func (a *agentCmd) editMemory(ctx context.Context, scope, name string) error {
	resp, err := a.agents.GetMemoryFile(ctx, &penguinv1.GetMemoryFileRequest{Project: a.project, Agent: a.agent, Scope: scope, Name: name})
	if err != nil && status.Code(err) != codes.NotFound {
		return err
	}
	return a.editInEditor(ctx, name, resp.GetContent(), func(body string) error {
		_, err := a.agents.UpdateMemoryFile(ctx, &penguinv1.UpdateMemoryFileRequest{Project: a.project, Agent: a.agent, Scope: scope, Name: name, Content: body, Version: resp.GetVersion()})
		return err
	})
}

// editInEditor opens text in $EDITOR (else vi) and saves what the editor
// leaves. A text the engine refuses as invalid reopens with the error
// above it, until it is accepted or left unchanged; any other refusal
// (ABORTED: the file changed meanwhile) ends the edit without writing.
func (a *agentCmd) editInEditor(ctx context.Context, file, original string, save func(body string) error) error {
	tmp, err := os.CreateTemp("", "penguin-*-"+filepath.Base(file))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	text := original
	for {
		if err := os.WriteFile(tmp.Name(), []byte(text), 0o600); err != nil {
			return err
		}
		editor := os.Getenv("EDITOR")
		if editor == "" {
			editor = "vi"
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", editor+` "$1"`, "sh", tmp.Name())
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("the editor: %w", err)
		}
		edited, err := os.ReadFile(tmp.Name())
		if err != nil {
			return err
		}
		body := stripErrorHeader(string(edited))
		if body == original {
			fmt.Fprintln(a.out, "unchanged")
			return nil
		}
		err = save(body)
		if status.Code(err) != codes.InvalidArgument {
			if err == nil {
				fmt.Fprintf(a.out, "saved %s\n", file)
			}
			return err
		}
		text = errorHeader(status.Convert(err).Message(), file) + body
	}
}

// model prints the agent's default model, or sets the one args names;
// with test, the model (the named one, else the current) is sent one short
// request first, and a failure sets nothing.
func (a *agentCmd) model(ctx context.Context, args []string, test bool) error {
	var ref *penguinv1.ModelRef
	if len(args) == 1 {
		var err error
		if ref, err = parseModelRef(args[0]); err != nil {
			return err
		}
	} else {
		resp, err := a.agents.GetAgentModel(ctx, &penguinv1.GetAgentModelRequest{Project: a.project, Agent: a.agent})
		if err != nil {
			return err
		}
		ref = resp.GetModel()
		if ref.GetProvider() == "" {
			if test {
				return errors.New("the agent has no default model to test")
			}
			fmt.Fprintln(a.out, "none: sessions name their model")
			return nil
		}
	}
	if test {
		res, err := a.agents.TestModel(ctx, &penguinv1.TestModelRequest{Project: a.project, Model: ref})
		if err != nil {
			return err
		}
		if !res.GetOk() {
			return fmt.Errorf("%s/%s does not answer: %s", ref.GetProvider(), ref.GetModelId(), res.GetMessage())
		}
		fmt.Fprintf(a.out, "%s/%s answered in %d ms\n", ref.GetProvider(), ref.GetModelId(), res.GetLatencyMs())
	}
	if len(args) == 0 {
		if !test {
			fmt.Fprintf(a.out, "%s/%s\n", ref.GetProvider(), ref.GetModelId())
		}
		return nil
	}
	if _, err := a.agents.SetAgentModel(ctx, &penguinv1.SetAgentModelRequest{Project: a.project, Agent: a.agent, Model: ref}); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "the default model is %s/%s\n", ref.GetProvider(), ref.GetModelId())
	return nil
}

const errorMark = "# penguin: "

// errorHeader is the refusal, as comment lines the next round strips.
func errorHeader(msg, file string) string {
	prefix := errorMark
	if file != "system_config.yaml" {
		prefix = "<!-- penguin: "
	}
	var b strings.Builder
	for _, line := range strings.Split(msg, "\n") {
		b.WriteString(prefix + line)
		if prefix != errorMark {
			b.WriteString(" -->")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func stripErrorHeader(text string) string {
	for strings.HasPrefix(text, errorMark) || strings.HasPrefix(text, "<!-- penguin: ") {
		_, rest, _ := strings.Cut(text, "\n")
		text = rest
	}
	return text
}

func newSkillsCmd() *cobra.Command {
	serverDir, replace := new(string), new(bool)
	install := &cobra.Command{Use: "install [PATH]", Short: "install a skill from a directory or a .tar.gz (or --server-dir NAME of the engine's skill library)", Args: nArgs("penguin skills install PATH | --server-dir NAME", 0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			req := &penguinv1.InstallSkillRequest{Project: a.project, Agent: a.agent, Replace: *replace}
			switch {
			case *serverDir != "" && len(args) == 0:
				req.Source = &penguinv1.InstallSkillRequest_ServerDir{ServerDir: *serverDir}
			case *serverDir == "" && len(args) == 1:
				data, err := skillArchive(args[0])
				if err != nil {
					return err
				}
				req.Source = &penguinv1.InstallSkillRequest_Archive{Archive: data}
			default:
				return usageErrorf("usage: penguin skills install PATH | --server-dir NAME")
			}
			resp, err := a.agents.InstallSkill(c.Context(), req)
			if err == nil {
				fmt.Fprintf(a.out, "installed %s (%d files)\n", resp.GetSkill().GetName(), resp.GetSkill().GetFiles())
			}
			return err
		}}
	install.Flags().StringVar(serverDir, "server-dir", "", "a skill directory in the engine's skill library")
	install.Flags().BoolVar(replace, "replace", false, "replace an installed skill of the same name")
	enable := func(on bool) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.SetSkillEnabled(c.Context(), &penguinv1.SetSkillEnabledRequest{Project: a.project, Agent: a.agent, Name: args[0], Enabled: on})
			return err
		}
	}
	return agentGroup("skills", "list, install, enable, disable and uninstall an agent's skills", true,
		&cobra.Command{Use: "list", Short: "list the skills", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.agents.ListSkills(c.Context(), &penguinv1.ListSkillsRequest{Project: a.project, Agent: a.agent})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tENABLED\tFILES\tDESCRIPTION")
			for _, s := range resp.GetSkills() {
				fmt.Fprintf(tw, "%s\t%v\t%d\t%s\n", s.GetName(), s.GetEnabled(), s.GetFiles(), s.GetDescription())
			}
			return tw.Flush()
		}},
		install,
		&cobra.Command{Use: "enable NAME", Short: "enable a skill", Args: nArgs("penguin skills enable NAME", 1, 1), RunE: enable(true)},
		&cobra.Command{Use: "disable NAME", Short: "disable a skill (its files stay)", Args: nArgs("penguin skills disable NAME", 1, 1), RunE: enable(false)},
		&cobra.Command{Use: "uninstall NAME", Short: "remove a skill", Args: nArgs("penguin skills uninstall NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.UninstallSkill(c.Context(), &penguinv1.UninstallSkillRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			return err
		}},
	)
}

// skillArchive reads a .tar.gz as it is, or packs a directory's regular
// files into one (a link is refused here as the engine would refuse it).
func skillArchive(p string) ([]byte, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return os.ReadFile(p)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(p, path)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (a link?); a skill may hold only files and directories", rel)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	return buf.Bytes(), err
}

func newMemoryCmd() *cobra.Command {
	mode, yes := new(string), new(bool)
	imp := &cobra.Command{Use: "import SCOPE FILE", Short: "import a scope's JSON export (--mode skip|overwrite|replace; --yes to confirm)", Args: nArgs("penguin memory import SCOPE FILE [--mode M] [--yes]", 2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			doc, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			resp, err := a.agents.ImportMemory(c.Context(), &penguinv1.ImportMemoryRequest{Project: a.project, Agent: a.agent, Scope: args[0], Document: string(doc), Mode: *mode, Confirm: *yes})
			if err == nil {
				fmt.Fprintf(a.out, "written %d, skipped %d, deleted %d\n", resp.GetWritten(), resp.GetSkipped(), resp.GetDeleted())
			}
			return err
		}}
	imp.Flags().StringVar(mode, "mode", "skip", "skip, overwrite or replace")
	imp.Flags().BoolVar(yes, "yes", false, "confirm an import that overwrites or deletes files")
	return agentGroup("memory", "browse, edit, delete, export and import an agent's memory", true,
		&cobra.Command{Use: "scopes", Short: "list the memory scopes", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.agents.ListMemoryScopes(c.Context(), &penguinv1.ListMemoryScopesRequest{Project: a.project, Agent: a.agent})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCOPE\tFILES\tWORKSPACE")
			for _, s := range resp.GetScopes() {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", s.GetKey(), s.GetFiles(), s.GetWorkspace())
			}
			return tw.Flush()
		}},
		&cobra.Command{Use: "list SCOPE", Short: "list a scope's files", Args: nArgs("penguin memory list SCOPE", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.agents.ListMemoryFiles(c.Context(), &penguinv1.ListMemoryFilesRequest{Project: a.project, Agent: a.agent, Scope: args[0]})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBYTES\tDESCRIPTION")
			for _, f := range resp.GetFiles() {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", f.GetName(), f.GetBytes(), f.GetFrontMatter()["description"])
			}
			return tw.Flush()
		}},
		&cobra.Command{Use: "show SCOPE NAME", Short: "print a memory file", Args: nArgs("penguin memory show SCOPE NAME", 2, 2), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.agents.GetMemoryFile(c.Context(), &penguinv1.GetMemoryFileRequest{Project: a.project, Agent: a.agent, Scope: args[0], Name: args[1]})
			if err == nil {
				_, err = io.WriteString(a.out, resp.GetContent())
			}
			return err
		}},
		&cobra.Command{Use: "edit SCOPE NAME", Short: "edit a memory file in $EDITOR (a new one if the scope lacks it)", Args: nArgs("penguin memory edit SCOPE NAME", 2, 2), RunE: func(c *cobra.Command, args []string) error {
			return ac(c).editMemory(c.Context(), args[0], args[1])
		}},
		&cobra.Command{Use: "delete SCOPE NAME", Short: "delete a memory file and its lines in MEMORY.md", Args: nArgs("penguin memory delete SCOPE NAME", 2, 2), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.DeleteMemoryFile(c.Context(), &penguinv1.DeleteMemoryFileRequest{Project: a.project, Agent: a.agent, Scope: args[0], Name: args[1]})
			return err
		}},
		&cobra.Command{Use: "export SCOPE [FILE]", Short: "write a scope as one JSON document (default: stdout)", Args: nArgs("penguin memory export SCOPE [FILE]", 1, 2), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.agents.ExportMemory(c.Context(), &penguinv1.ExportMemoryRequest{Project: a.project, Agent: a.agent, Scope: args[0]})
			if err != nil {
				return err
			}
			if len(args) == 2 {
				return os.WriteFile(args[1], []byte(resp.GetDocument()), 0o600)
			}
			_, err = fmt.Fprintln(a.out, resp.GetDocument())
			return err
		}},
		imp,
	)
}

func newVaultCmd() *cobra.Command {
	return agentGroup("vault", "list, set and delete an agent's vault values", true,
		&cobra.Command{Use: "list", Short: "list the names (values are never shown)", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.agents.ListVault(c.Context(), &penguinv1.ListVaultRequest{Project: a.project, Agent: a.agent})
			for _, n := range resp.GetNames() {
				fmt.Fprintln(a.out, n)
			}
			return err
		}},
		&cobra.Command{Use: "set NAME", Short: "set a value, read from stdin or a hidden prompt (never an argument)", Args: nArgs("penguin vault set NAME   (the value comes from stdin or a prompt)", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			value, err := readSecret(a.in, "value of "+args[0])
			if err != nil {
				return err
			}
			_, err = a.agents.SetVault(c.Context(), &penguinv1.SetVaultRequest{Project: a.project, Agent: a.agent, Name: args[0], Value: value})
			return err
		}},
		&cobra.Command{Use: "delete NAME", Short: "delete a value", Args: nArgs("penguin vault delete NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.DeleteVault(c.Context(), &penguinv1.DeleteVaultRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			return err
		}},
	)
}

// readSecret reads a value from a terminal without echoing it (after
// prompt), or the whole of stdin (less one final newline) when it is not
// a terminal.
func readSecret(in *os.File, prompt string) (string, error) {
	if term.IsTerminal(in.Fd()) {
		fmt.Fprintf(os.Stderr, "%s: ", prompt)
		v, err := term.ReadPassword(in.Fd())
		fmt.Fprintln(os.Stderr)
		return string(v), err
	}
	v, err := io.ReadAll(bufio.NewReader(io.LimitReader(in, 1<<20)))
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(v), "\n"), "\r")
	if s == "" {
		return "", errors.New("no value on stdin")
	}
	return s, nil
}

func newToolsCmd() *cobra.Command {
	enable := func(on bool) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.SetAgentToolEnabled(c.Context(), &penguinv1.SetAgentToolEnabledRequest{Project: a.project, Agent: a.agent, Name: args[0], Enabled: on})
			return err
		}
	}
	return agentGroup("tools", "list an agent's tools; enable and disable builtin ones", true,
		&cobra.Command{Use: "list", Short: "list the tools: builtin, the engine's and custom, enabled or not", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.agents.ListAgentTools(c.Context(), &penguinv1.ListAgentToolsRequest{Project: a.project, Agent: a.agent})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tPERMISSION\tENABLED\tMODELS")
			for _, tool := range resp.GetTools() {
				models := tool.GetForModel()
				if models == "" {
					models = "all"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", tool.GetName(), tool.GetKind(), tool.GetPermission(), tool.GetEnabled(), models)
			}
			return tw.Flush()
		}},
		&cobra.Command{Use: "enable NAME", Short: "offer a builtin tool to the model", Args: nArgs("penguin tools enable NAME", 1, 1), RunE: enable(true)},
		&cobra.Command{Use: "disable NAME", Short: "stop offering a builtin tool to the model", Args: nArgs("penguin tools disable NAME", 1, 1), RunE: enable(false)},
	)
}

func newMCPCmd() *cobra.Command {
	var spec penguinv1.MCPServerSpec
	var env, headers []string
	add := &cobra.Command{Use: "add NAME", Short: "add an MCP server, or replace the one of that name (a stdio server is tested first)", Args: nArgs("penguin mcp add NAME (--command CMD [--arg A]... | --url URL) [--permission auto|r|rw]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			spec.Name = args[0]
			var err error
			if spec.Env, err = keyValues("--env", env); err != nil {
				return err
			}
			if spec.Headers, err = keyValues("--header", headers); err != nil {
				return err
			}
			_, err = a.agents.PutMCPServer(c.Context(), &penguinv1.PutMCPServerRequest{Project: a.project, Agent: a.agent, Server: &spec})
			return err
		}}
	f := add.Flags()
	f.StringVar(&spec.Command, "command", "", "the command of a stdio server")
	f.StringArrayVar(&spec.Args, "arg", nil, "an argument of the command (repeat)")
	f.StringVar(&spec.Url, "url", "", "the endpoint of an http or sse server")
	f.StringVar(&spec.Transport, "transport", "", "stdio, http or sse (default: inferred)")
	f.StringVar(&spec.Permission, "permission", "", "auto, r or rw")
	f.StringVar(&spec.Cwd, "cwd", "", "a stdio server's directory")
	f.StringArrayVar(&env, "env", nil, "NAME=VALUE for a stdio server (repeat; an empty VALUE keeps the current one)")
	f.StringArrayVar(&headers, "header", nil, "NAME=VALUE sent to an http server (repeat; an empty VALUE keeps the current one)")
	return agentGroup("mcp", "list, add, remove and test an agent's MCP servers", true,
		&cobra.Command{Use: "list", Short: "list the MCP servers", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.agents.ListMCPServers(c.Context(), &penguinv1.ListMCPServersRequest{Project: a.project, Agent: a.agent})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTRANSPORT\tPERMISSION\tTARGET")
			for _, s := range resp.GetServers() {
				target := strings.TrimSpace(s.GetCommand() + " " + strings.Join(s.GetArgs(), " "))
				if s.GetUrl() != "" {
					target = s.GetUrl()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.GetName(), s.GetTransport(), s.GetPermission(), target)
			}
			return tw.Flush()
		}},
		add,
		&cobra.Command{Use: "remove NAME", Short: "remove an MCP server", Args: nArgs("penguin mcp remove NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.agents.DeleteMCPServer(c.Context(), &penguinv1.DeleteMCPServerRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			return err
		}},
		&cobra.Command{Use: "test NAME", Short: "connect to an MCP server and list its tools", Args: nArgs("penguin mcp test NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.agents.TestMCPServer(c.Context(), &penguinv1.TestMCPServerRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			if err != nil {
				return err
			}
			if !resp.GetOk() {
				return fmt.Errorf("%s does not connect: %s", args[0], resp.GetMessage())
			}
			fmt.Fprintf(a.out, "ok in %d ms: %s\n", resp.GetLatencyMs(), strings.Join(resp.GetTools(), ", "))
			return nil
		}},
	)
}

func keyValues(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("%s %q: want NAME=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

// parseModelRef reads PROVIDER/MODEL.
func parseModelRef(s string) (*penguinv1.ModelRef, error) {
	provider, id, ok := strings.Cut(s, "/")
	if !ok || provider == "" || id == "" {
		return nil, usageErrorf("the model is PROVIDER/MODEL, such as openai/gpt-5-mini: %q", s)
	}
	return &penguinv1.ModelRef{Provider: provider, ModelId: id}, nil
}

// newModelSettingsCmd is `penguin model-settings list|set|clear`: a
// project's context window and price of a model the catalog lacks (a
// local one) or that the project runs otherwise.
func newModelSettingsCmd() *cobra.Command {
	list := &cobra.Command{Use: "list", Short: "list the project's model settings", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
		a := ac(c)
		resp, err := a.agents.ListModelSettings(c.Context(), &penguinv1.ListModelSettingsRequest{Project: a.project})
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tCONTEXT WINDOW\tINPUT $/M\tOUTPUT $/M\tCACHE READ $/M\tCACHE WRITE $/M")
		for _, m := range resp.GetSettings() {
			window, in, out, read, write := "catalog", "catalog", "catalog", "catalog", "catalog"
			if m.GetContextWindow() > 0 {
				window = strconv.FormatInt(m.GetContextWindow(), 10)
			}
			if p := m.GetPrice(); p != nil {
				in, out, read, write = fmtPrice(p.Input), fmtPrice(p.Output), "input", "input"
				if p.CacheRead != nil {
					read = fmtPrice(*p.CacheRead)
				}
				if p.CacheWrite != nil {
					write = fmtPrice(*p.CacheWrite)
				}
			}
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\n", m.GetModel().GetProvider(), m.GetModel().GetModelId(), window, in, out, read, write)
		}
		return tw.Flush()
	}}
	set := &cobra.Command{Use: "set PROVIDER/MODEL", Short: "set a model's context window and/or price in the project (USD per million tokens)",
		Args: nArgs("penguin model-settings set PROVIDER/MODEL [--context-window N] [--input USD --output USD [--cache-read USD] [--cache-write USD]]", 1, 1)}
	window := set.Flags().Int64("context-window", 0, "the context window in tokens (0: the catalog's)")
	in := set.Flags().Float64("input", 0, "the price of uncached input, USD per million tokens")
	out := set.Flags().Float64("output", 0, "the price of output, USD per million tokens")
	read := set.Flags().Float64("cache-read", 0, "the price of input read from the cache (default: the input price)")
	write := set.Flags().Float64("cache-write", 0, "the price of input written to the cache (default: the input price)")
	set.RunE = func(c *cobra.Command, args []string) error {
		a := ac(c)
		ref, err := parseModelRef(args[0])
		if err != nil {
			return err
		}
		f := c.Flags()
		settings := &penguinv1.ModelSettings{Model: ref, ContextWindow: *window}
		if f.Changed("input") || f.Changed("output") || f.Changed("cache-read") || f.Changed("cache-write") {
			settings.Price = &penguinv1.ModelPrice{Input: *in, Output: *out}
			if f.Changed("cache-read") {
				settings.Price.CacheRead = read
			}
			if f.Changed("cache-write") {
				settings.Price.CacheWrite = write
			}
		}
		if settings.ContextWindow == 0 && settings.Price == nil {
			return usageErrorf("give --context-window or a price (--input, --output); penguin model-settings clear removes a model's settings")
		}
		_, err = a.agents.SetModelSettings(c.Context(), &penguinv1.SetModelSettingsRequest{Project: a.project, Settings: settings})
		return err
	}
	unset := &cobra.Command{Use: "clear PROVIDER/MODEL", Short: "remove a model's settings from the project (the catalog's apply again)",
		Args: nArgs("penguin model-settings clear PROVIDER/MODEL", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			ref, err := parseModelRef(args[0])
			if err != nil {
				return err
			}
			_, err = a.agents.SetModelSettings(c.Context(), &penguinv1.SetModelSettingsRequest{Project: a.project, Settings: &penguinv1.ModelSettings{Model: ref}})
			return err
		}}
	return agentGroup("model-settings", "a project's context window and price of a model (a local one the catalog lacks)", false, list, set, unset)
}

// fmtPrice prints a price without trailing zeros.
func fmtPrice(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
