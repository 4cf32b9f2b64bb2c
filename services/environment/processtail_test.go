package environment_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// ListProcesses shows each command's last output, whether or not the
// model read it: whole lines within the bound, a progress bar's last
// state, no escape sequences.
func TestListProcessesShowsTheOutputTail(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	// 300 lines are more than the tail keeps; the first must be gone.
	cmd := `echo first line; for i in $(seq 1 300); do echo line $i; done; printf 'progress 10%%\rprogress 100%%\n\033[31mred\033[0m\n'; sleep 30`
	r := h.exec(env, "exec_command", args(map[string]any{"cmd": cmd, "yield_time_ms": 1500}))
	wantStop(t, r, ok, "[still running as process_id ")
	procs, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || len(procs.GetProcesses()) != 1 {
		t.Fatalf("ListProcesses: %v %v", procs, err)
	}
	tail := procs.GetProcesses()[0].GetOutputTail()
	if !strings.HasSuffix(tail, "line 299\nline 300\nprogress 100%\nred") || strings.Contains(tail, "first line") ||
		!strings.HasPrefix(tail, "line ") || strings.ContainsAny(tail, "\r\x1b") || len(tail) > 2048 {
		t.Fatalf("output tail = %q", tail)
	}
	// Reading the output (input_command) does not empty the tail.
	h.exec(env, "input_command", args(map[string]any{"process_id": procs.GetProcesses()[0].GetProcessId(), "yield_time_ms": 100}))
	again, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || again.GetProcesses()[0].GetOutputTail() != tail {
		t.Fatalf("after a read, output tail = %q, %v", again.GetProcesses()[0].GetOutputTail(), err)
	}
}

// The processes panel's output tail never shows a vault value: not whole,
// not the end of one that the tail's start cut (a long line with no line
// break, or the last lines of a multi-line value such as a key), and not
// one that colour escapes split.
func TestListProcessesMasksVaultValues(t *testing.T) {
	h := start(t, environment.Options{})
	token := "tok-7c1e9a5b3d2f8e6a4c0b9d7f5e3a1c8b"
	var key strings.Builder
	key.WriteString("-----BEGIN PRIVATE KEY-----\n")
	line := func(i int) string { return fmt.Sprintf("%016x", uint64(i+1)*0x9e3779b97f4a7c1) }
	for i := range 60 { // 60 lines of 64 characters: longer than the tail
		key.WriteString(strings.Repeat(line(i), 4) + "\n")
	}
	key.WriteString("-----END PRIVATE KEY-----")
	env := h.create(&penguinv1.CreateEnvironmentRequest{Vault: map[string]string{"API_TOKEN": token, "SIGNING_KEY": key.String()}}).GetEnvironmentId()
	for name, cmd := range map[string]string{
		"whole":          `echo "token=$API_TOKEN"; echo after`,
		"cut, one line":  `printf 'token=%s' "$API_TOKEN"; printf 'y%.0s' $(seq 1 2030)`,
		"cut, multiline": `printf '%s\n' "$SIGNING_KEY"; echo after`,
		"coloured":       `printf 'TOKEN=tok-7c1e9a5b\033[01;31m3d2f8e6a\033[m4c0b9d7f5e3a1c8b\n'`,
	} {
		t.Run(name, func(t *testing.T) {
			r := h.exec(env, "exec_command", args(map[string]any{"cmd": cmd + "; sleep 30", "yield_time_ms": 1000}))
			wantStop(t, r, ok, "[still running as process_id ")
			procs, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
			if err != nil {
				t.Fatal(err)
			}
			var tail string
			for _, p := range procs.GetProcesses() {
				if strings.HasPrefix(p.GetCommand(), cmd) {
					tail = p.GetOutputTail()
				}
			}
			if tail == "" {
				t.Fatalf("no tail for %q in %v", cmd, procs)
			}
			for _, leak := range []string{token[len(token)-12:], "3d2f8e6a", line(59), "END PRIVATE KEY"} {
				if strings.Contains(tail, leak) {
					t.Fatalf("the output tail shows %q of a vault value:\n%s", leak, tail)
				}
			}
		})
	}
}
