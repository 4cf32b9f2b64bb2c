package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Environment variables that shape the logger. They have no flags: logging
// is set up before a subcommand parses its own flags, so that flag errors
// are logged the same way as everything else.
const (
	EnvLogFormat = EnvPrefix + "LOG_FORMAT"
	EnvLogLevel  = EnvPrefix + "LOG_LEVEL"
)

// NewLogger returns a logger writing to w. format is "text" (the default,
// for people) or "json" (for log collectors); level is one of "debug",
// "info" (the default), "warn" or "error", in any case. Anything else is an
// error, so a typo does not silently change what gets logged.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
}

func parseLevel(level string) (slog.Level, error) {
	var lvl slog.Level
	if level == "" {
		return slog.LevelInfo, nil
	}
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return lvl, nil
}

// LoggerFromEnv returns [NewLogger] configured by PENGUIN_LOG_FORMAT and
// PENGUIN_LOG_LEVEL; an error names the variable at fault.
func LoggerFromEnv(w io.Writer, lookup LookupFunc) (*slog.Logger, error) {
	format, _ := lookup(EnvLogFormat)
	level, _ := lookup(EnvLogLevel)
	if _, err := parseLevel(level); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvLogLevel, err)
	}
	log, err := NewLogger(w, format, level)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvLogFormat, err)
	}
	return log, nil
}
