package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestEnvName(t *testing.T) {
	t.Parallel()
	for flagName, want := range map[string]string{
		"listen":          "PENGUIN_LISTEN",
		"auth-token-file": "PENGUIN_AUTH_TOKEN_FILE",
		"db_url":          "PENGUIN_DB_URL",
	} {
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// testFlags is a flag set with one flag of each kind the commands use.
type testFlags struct {
	fs      *pflag.FlagSet
	listen  *string
	timeout *time.Duration
	verbose *bool
	workers *int
}

func newTestFlags() testFlags {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return testFlags{
		fs:      fs,
		listen:  fs.String("listen", "127.0.0.1:7420", "address to listen on"),
		timeout: fs.Duration("shutdown-timeout", 10*time.Second, "how long to drain"),
		verbose: fs.Bool("verbose", false, "say more"),
		workers: fs.Int("workers", 4, "worker count"),
	}
}

// parse is what a command does: the command line, then the environment.
func (f testFlags) parse(args []string, env map[string]string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	return ApplyEnv(f.fs, MapLookup(env), "help")
}

func TestApplyEnvPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantListen  string
		wantTimeout time.Duration
		wantVerbose bool
		wantWorkers int
	}{
		{
			name:        "defaults when nothing is set",
			wantListen:  "127.0.0.1:7420",
			wantTimeout: 10 * time.Second,
			wantWorkers: 4,
		},
		{
			name: "environment fills unset flags",
			env: map[string]string{
				"PENGUIN_LISTEN":           "0.0.0.0:9000",
				"PENGUIN_SHUTDOWN_TIMEOUT": "3s",
				"PENGUIN_VERBOSE":          "true",
				"PENGUIN_WORKERS":          "8",
			},
			wantListen:  "0.0.0.0:9000",
			wantTimeout: 3 * time.Second,
			wantVerbose: true,
			wantWorkers: 8,
		},
		{
			name: "command line wins over environment",
			args: []string{"--listen", "127.0.0.1:1", "--workers=2"},
			env: map[string]string{
				"PENGUIN_LISTEN":  "0.0.0.0:9000",
				"PENGUIN_WORKERS": "8",
			},
			wantListen:  "127.0.0.1:1",
			wantTimeout: 10 * time.Second,
			wantWorkers: 2,
		},
		{
			name:        "empty variable counts as unset",
			env:         map[string]string{"PENGUIN_LISTEN": "", "PENGUIN_VERBOSE": ""},
			wantListen:  "127.0.0.1:7420",
			wantTimeout: 10 * time.Second,
			wantWorkers: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newTestFlags()
			if err := f.parse(tt.args, tt.env); err != nil {
				t.Fatalf("parse: %v", err)
			}
			if *f.listen != tt.wantListen || *f.timeout != tt.wantTimeout ||
				*f.verbose != tt.wantVerbose || *f.workers != tt.wantWorkers {
				t.Errorf("got listen=%q timeout=%v verbose=%v workers=%d, want %q %v %v %d",
					*f.listen, *f.timeout, *f.verbose, *f.workers,
					tt.wantListen, tt.wantTimeout, tt.wantVerbose, tt.wantWorkers)
			}
		})
	}
}

func TestApplyEnvRejectsBadValues(t *testing.T) {
	t.Parallel()
	f := newTestFlags()
	err := f.parse(nil, map[string]string{
		"PENGUIN_SHUTDOWN_TIMEOUT": "soon",
		"PENGUIN_WORKERS":          "many",
	})
	if err == nil {
		t.Fatal("ApplyEnv accepted PENGUIN_SHUTDOWN_TIMEOUT=soon and PENGUIN_WORKERS=many")
	}
	for _, want := range []string{`PENGUIN_SHUTDOWN_TIMEOUT="soon"`, "--shutdown-timeout", `PENGUIN_WORKERS="many"`, "--workers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestApplyEnvSkips leaves the named flags alone: no variable may turn on
// --help.
func TestApplyEnvSkips(t *testing.T) {
	t.Parallel()
	f := newTestFlags()
	help := f.fs.Bool("help", false, "help")
	if err := f.parse(nil, map[string]string{"PENGUIN_HELP": "true"}); err != nil || *help {
		t.Fatalf("PENGUIN_HELP set --help: %v, %v", *help, err)
	}
}

func TestDocumentEnvListsVariables(t *testing.T) {
	t.Parallel()
	f := newTestFlags()
	f.fs.Bool("help", false, "help")
	DocumentEnv(f.fs, "help")
	DocumentEnv(f.fs, "help") // a second call must not repeat the suffix
	usage := f.fs.FlagUsages()
	for _, want := range []string{"[$PENGUIN_LISTEN]", "[$PENGUIN_SHUTDOWN_TIMEOUT]", "[$PENGUIN_VERBOSE]"} {
		if strings.Count(usage, want) != 1 {
			t.Errorf("help text has %s %d times, want once:\n%s", want, strings.Count(usage, want), usage)
		}
	}
	if strings.Contains(usage, "PENGUIN_HELP") {
		t.Errorf("help names a variable for --help:\n%s", usage)
	}
}

func TestSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", "s3cret\n")
	emptyFile := write("empty", " \n")

	tests := []struct {
		name    string
		env     map[string]string
		path    string
		want    string
		wantErr string
	}{
		{name: "neither", want: ""},
		{name: "environment", env: map[string]string{"PENGUIN_AUTH_TOKEN": " tok "}, want: "tok"},
		{name: "file, trailing newline removed", path: tokenFile, want: "s3cret"},
		{name: "empty environment falls back to file", env: map[string]string{"PENGUIN_AUTH_TOKEN": ""}, path: tokenFile, want: "s3cret"},
		{name: "both is a conflict", env: map[string]string{"PENGUIN_AUTH_TOKEN": "tok"}, path: tokenFile, wantErr: "both"},
		{name: "missing file", path: filepath.Join(dir, "absent"), wantErr: "read secret file"},
		{name: "empty file", path: emptyFile, wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Secret(MapLookup(tt.env), "PENGUIN_AUTH_TOKEN", tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Secret() = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Secret() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSecretConflictIsTyped(t *testing.T) {
	t.Parallel()
	_, err := Secret(MapLookup(map[string]string{"X": "a"}), "X", "/some/file")
	if !errors.Is(err, ErrSecretConflict) {
		t.Fatalf("err = %v, want ErrSecretConflict", err)
	}
}

func TestLoggerFromEnv(t *testing.T) {
	t.Parallel()
	t.Run("json at debug", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		log, err := LoggerFromEnv(&buf, MapLookup(map[string]string{
			"PENGUIN_LOG_FORMAT": "JSON", "PENGUIN_LOG_LEVEL": "debug",
		}))
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("hello", "k", "v")
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
		}
		if line["msg"] != "hello" || line["k"] != "v" || line["level"] != "DEBUG" {
			t.Errorf("line = %v", line)
		}
	})
	t.Run("text at info by default drops debug", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		log, err := LoggerFromEnv(&buf, MapLookup(nil))
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("hidden")
		log.Info("shown")
		if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "msg=shown") {
			t.Errorf("output = %q", got)
		}
	})
	t.Run("warn level drops info", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		log, err := LoggerFromEnv(&buf, MapLookup(map[string]string{"PENGUIN_LOG_LEVEL": "WARN"}))
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hidden")
		log.Warn("shown")
		if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "msg=shown") {
			t.Errorf("output = %q", got)
		}
	})
	for _, tt := range []struct{ env, value string }{
		{"PENGUIN_LOG_FORMAT", "xml"},
		{"PENGUIN_LOG_LEVEL", "loud"},
	} {
		t.Run("bad "+tt.env, func(t *testing.T) {
			t.Parallel()
			_, err := LoggerFromEnv(io.Discard, MapLookup(map[string]string{tt.env: tt.value}))
			if err == nil || !strings.Contains(err.Error(), tt.env) || !strings.Contains(err.Error(), tt.value) {
				t.Fatalf("err = %v, want one naming %s and %q", err, tt.env, tt.value)
			}
		})
	}
}
