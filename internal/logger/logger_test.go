package logger_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/penguin-agent/penguin/internal/logger"
)

func TestOrDiscard(t *testing.T) {
	// nil discards, even when the process's default logger would write.
	var def bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	l := logger.OrDiscard(nil)
	l.Error("nobody hears this")
	if l.Enabled(context.Background(), slog.LevelError) || def.Len() != 0 {
		t.Fatalf("a nil logger wrote %q (or is enabled); want it discarded", def.String())
	}
	// A logger given is the one used.
	var given bytes.Buffer
	g := slog.New(slog.NewTextHandler(&given, nil))
	if logger.OrDiscard(g) != g {
		t.Fatal("OrDiscard replaced the logger it was given")
	}
}
