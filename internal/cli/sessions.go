package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
)

// Sessions runs `penguin sessions list|show|export|delete`: list prints a
// table, show renders a session's history as a terminal would have shown
// it, export writes its trace as JSON lines, delete removes it.
func Sessions(ctx context.Context, engine penguinv1.EngineServiceClient, args []string, out io.Writer, color bool) error {
	if len(args) == 0 {
		return errors.New("usage: penguin sessions list | show ID | export ID | delete ID")
	}
	verb, rest := args[0], args[1:]
	if verb != "list" && len(rest) != 1 {
		return fmt.Errorf("usage: penguin sessions %s ID", verb)
	}
	switch verb {
	case "list":
		return listSessions(ctx, engine, out)
	case "show":
		return showSession(ctx, engine, rest[0], out, color)
	case "export":
		return exportSession(ctx, engine, rest[0], out)
	case "delete":
		if _, err := engine.DeleteSession(ctx, &penguinv1.DeleteSessionRequest{SessionId: rest[0]}); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted %s\n", rest[0])
		return nil
	}
	return fmt.Errorf("unknown sessions command %q: want list, show, export or delete", verb)
}

func listSessions(ctx context.Context, engine penguinv1.EngineServiceClient, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tMODEL\tSTATE\tUPDATED\tTITLE")
	token := ""
	for {
		resp, err := engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageToken: token})
		if err != nil {
			return err
		}
		for _, s := range resp.GetSessions() {
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", s.GetSessionId(), s.GetModel().GetProvider(), s.GetModel().GetModelId(),
				enumword.Word(s.GetState()), s.GetUpdatedAt().AsTime().Local().Format("2006-01-02 15:04"), s.GetTitle())
		}
		if token = resp.GetNextPageToken(); token == "" {
			return tw.Flush()
		}
	}
}

func showSession(ctx context.Context, engine penguinv1.EngineServiceClient, id string, out io.Writer, color bool) error {
	r := NewRenderer(out, RendererOptions{Color: color})
	var after int64
	for {
		resp, err := engine.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id, AfterSequence: after})
		if err != nil {
			return err
		}
		for _, ev := range resp.GetEvents() {
			if t := ev.GetMessage().GetText(); t != nil && t.GetRole() == penguinv1.Role_ROLE_USER && t.GetSender() == penguinv1.Sender_SENDER_UNSPECIFIED {
				fmt.Fprintf(out, "› %s\n", t.GetText())
			}
			r.Event(ev)
			after = ev.GetSequence()
		}
		if !resp.GetMore() || len(resp.GetEvents()) == 0 {
			if u := r.Usage(); u != nil {
				fmt.Fprintln(out, FormatUsage(u))
			}
			return nil
		}
	}
}

func exportSession(ctx context.Context, engine penguinv1.EngineServiceClient, id string, out io.Writer) error {
	stream, err := engine.ExportTrace(ctx, &penguinv1.ExportTraceRequest{SessionId: id})
	if err != nil {
		return err
	}
	for {
		line, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, line.GetLine()); err != nil {
			return err
		}
	}
}
