package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
)

// newSessionsCmd is `penguin sessions [list] | show ID | export ID [DIR]
// | delete ID | rename ID TITLE | pin ID | unpin ID | archive ID |
// unarchive ID | changes ID | diff ID [SEQ] | undo ID [SEQ] | redo ID
// [SEQ]`, against --engine or the embedded server over the same data
// directory. Alone it lists.
func newSessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "list, show, export, delete, rename, pin and archive sessions; show and undo their changes",
		Long:  "Lists sessions (the default), prints one as the terminal showed it, writes its trace, deletes,\nrenames, pins or archives it, shows what its turns changed in the workspace and undoes or redoes it.",
		Args:  unknownCommand,
	}
	cf := addClientFlags(cmd.PersistentFlags())
	cf.embedded.llmOptional = true
	// run calls cli.Sessions with the verb and its arguments.
	run := func(verb string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			conn, err := cf.connect(ctx)
			if err != nil {
				return fmt.Errorf("sessions: %w", err)
			}
			defer conn.Close()
			if err := cli.Sessions(ctx, conn.engine, append([]string{verb}, args...), os.Stdout, useColor(os.Stdout)); err != nil {
				return fmt.Errorf("sessions: %w", statusError(err))
			}
			return nil
		}
	}
	oneID := func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("usage: penguin sessions %s ID", cmd.Name())
		}
		return nil
	}
	cmd.RunE = run("list")
	var project string
	list := &cobra.Command{Use: "list", Short: "list the sessions, newest first", Args: noArgs, RunE: func(cmd *cobra.Command, args []string) error {
		if project == "" {
			return run("list")(cmd, args)
		}
		ctx := cmd.Context()
		conn, err := cf.connect(ctx)
		if err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		defer conn.Close()
		id, err := projectID(ctx, penguinv1.NewProjectServiceClient(conn.conn), project)
		if err == nil {
			err = cli.ListSessions(ctx, conn.engine, id, os.Stdout)
		}
		if err != nil {
			return fmt.Errorf("sessions list: %w", statusError(err))
		}
		return nil
	}}
	list.Flags().StringVar(&project, "project", "", "only the sessions of this project, by its id or its name")
	cmd.AddCommand(
		list,
		&cobra.Command{Use: "show ID", Short: "print a session as the terminal showed it", Args: oneID, RunE: run("show")},
		&cobra.Command{
			Use: "export ID [DIR]", Short: "write a session's trace files, one per model context",
			Long: "Writes one trace file per model context into DIR (default: the current\ndirectory), named ID_001.jsonl, ID_002.jsonl, ...",
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) < 1 || len(args) > 2 {
					return usageErrorf("usage: penguin sessions export ID [DIR]")
				}
				return nil
			},
			RunE: run("export"),
		},
		&cobra.Command{Use: "delete ID", Short: "delete a session and its log", Args: oneID, RunE: run("delete")},
		&cobra.Command{
			Use: "rename ID TITLE", Short: "give a session a title (the rest of the arguments)",
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) < 2 {
					return usageErrorf("usage: penguin sessions rename ID TITLE")
				}
				return nil
			},
			RunE: run("rename"),
		},
		&cobra.Command{Use: "pin ID", Short: "pin a session to the top of the lists", Args: oneID, RunE: run("pin")},
		&cobra.Command{Use: "unpin ID", Short: "unpin a session", Args: oneID, RunE: run("unpin")},
		&cobra.Command{Use: "archive ID", Short: "archive a session (it leaves the web app's active list; it also unpins)", Args: oneID, RunE: run("archive")},
		&cobra.Command{Use: "unarchive ID", Short: "bring an archived session back", Args: oneID, RunE: run("unarchive")},
		&cobra.Command{Use: "changes ID", Short: "list what the session's turns changed in its workspace", Args: oneID, RunE: run("changes")},
		&cobra.Command{Use: "diff ID [SEQ]", Short: "show a turn's change of the workspace as a diff (default: the last)", Args: idAndSeq("diff"), RunE: run("diff")},
		undoCmd("undo", "restore the files a turn changed (default: the last turn not undone)", run),
		undoCmd("redo", "redo an undone turn's change (default: the last undone)", run),
	)
	return cmd
}

// idAndSeq takes a session's id and an optional change sequence.
func idAndSeq(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usageErrorf("usage: penguin sessions %s ID [SEQ]", verb)
		}
		return nil
	}
}

// undoCmd is `penguin sessions undo|redo ID [SEQ] [--force]`.
func undoCmd(verb, short string, run func(string) func(*cobra.Command, []string) error) *cobra.Command {
	var force bool
	c := &cobra.Command{Use: verb + " ID [SEQ]", Short: short, Args: idAndSeq(verb)}
	c.Flags().BoolVar(&force, "force", false, "overwrite files that changed since (what they held is kept, so this can be undone too)")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if force {
			args = append(args, "--force")
		}
		return run(verb)(cmd, args)
	}
	return c
}

// projectID returns the id of the caller's project named p: the project
// whose id is p, else the one whose name is p (ignoring case). A name of
// several projects is an error; one of none is returned as it is, for the
// server to answer as for any unknown project.
func projectID(ctx context.Context, projects penguinv1.ProjectServiceClient, p string) (string, error) {
	resp, err := projects.ListProjects(ctx, &penguinv1.ListProjectsRequest{})
	if err != nil {
		return "", err
	}
	var named []string
	for _, x := range resp.GetProjects() {
		if x.GetProjectId() == p {
			return p, nil
		}
		if strings.EqualFold(x.GetName(), p) {
			named = append(named, x.GetProjectId())
		}
	}
	switch len(named) {
	case 0:
		return p, nil
	case 1:
		return named[0], nil
	}
	return "", fmt.Errorf("%d of your projects are named %q (%s); give its id", len(named), p, strings.Join(named, ", "))
}
