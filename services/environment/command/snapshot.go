package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// DefaultProfileTimeout bounds the login shell that takes an environment's
// shell snapshot: a profile that hangs (a version manager waiting on a
// lock, a prompt) is given up on once, rather than stalling every command.
const DefaultProfileTimeout = 10 * time.Second

// snapshotMarker separates what the login profile printed from the
// environment that follows it.
const snapshotMarker = "\x00penguin-shell-snapshot\x00"

// maxSnapshot bounds what the snapshot's login shell may print.
const maxSnapshot = 4 << 20

// unsnapshotted are the variables a snapshot does not keep: they describe
// the shell that took it, not the environment.
var unsnapshotted = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// snapshot is the environment a login shell leaves, taken once per
// environment; commands then run with a plain shell -c in it, so the
// profile's cost (and any trouble it has) is paid once, not per command.
type snapshot struct {
	done chan struct{}
	// env is the captured environment, nil when none could be taken.
	env []string
	// notice says what went wrong, for the first command's output.
	notice string
}

// takeSnapshot runs the login shell once, under the launcher, with
// stdin closed and output on pipes, and records the environment it
// exports. It never fails: a profile that breaks, hangs or prints no
// environment leaves env nil and a notice.
func (m *Manager) takeSnapshot() {
	defer close(m.snap.done)
	timeout := m.opts.ProfileTimeout
	if timeout <= 0 {
		timeout = DefaultProfileTimeout
	}
	// env -0 prints every variable exactly, values with newlines
	// included; the marker skips what the profile itself printed.
	script := `printf '` + strings.ReplaceAll(snapshotMarker, "\x00", `\0`) + `'; exec env -0`
	cmd := exec.Command(m.shell, "-lc", script)
	cmd.Dir = m.opts.Dir
	cmd.Env = m.opts.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &stdout, n: maxSnapshot}
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	// A daemon the profile started may keep the pipes open.
	cmd.WaitDelay = time.Second
	tracker, err := m.opts.Launcher.Launch(cmd)
	if err != nil {
		m.snap.notice = fmt.Sprintf("[penguin: the login shell could not be started to read its profile (%v); commands run without what it sets]", err)
		return
	}
	defer tracker.Release()
	if err := cmd.Start(); err != nil {
		m.snap.notice = fmt.Sprintf("[penguin: the login shell could not be started to read its profile (%v); commands run without what it sets]", err)
		return
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = tracker.Kill()
		<-waited
		m.snap.notice = fmt.Sprintf("[penguin: the login shell's profile did not finish within %s, so commands run without what it sets; fix the profile, or create the environment with login_shell to run it with every command]", timeout)
		return
	case <-m.closing:
		_ = tracker.Kill()
		<-waited
		return
	}
	_, rest, found := bytes.Cut(stdout.Bytes(), []byte(snapshotMarker))
	if err != nil || !found {
		why := "printed no environment"
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			why = fmt.Sprintf("exited with status %d", ee.ExitCode())
		}
		m.snap.notice = fmt.Sprintf("[penguin: the login shell %s, so commands run without what its profile sets%s]", why, excerpt(stderr.String()))
		return
	}
	var env []string
	for kv := range strings.SplitSeq(string(rest), "\x00") {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || unsnapshotted[k] {
			continue
		}
		env = append(env, kv)
	}
	m.snap.env = env
}

// excerpt gives the last lines of a profile's error output, for a notice.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "; it said: " + strings.Join(lines, " / ")
}

// commandEnv is the environment of each command: the snapshot (or the
// base environment without one), then Fixed, which a profile cannot
// override. It is worked out once, when the first command starts (after
// the snapshot was taken), and shared by every command: exec copies it.
func (m *Manager) commandEnv() []string { return m.env() }

// buildEnv does commandEnv's work.
func (m *Manager) buildEnv() []string {
	base := m.opts.Env
	if m.snap != nil && m.snap.env != nil {
		base = m.snap.env
	}
	if len(m.opts.Fixed) == 0 {
		return base
	}
	fixed := map[string]bool{}
	for _, kv := range m.opts.Fixed {
		k, _, _ := strings.Cut(kv, "=")
		fixed[k] = true
	}
	out := make([]string, 0, len(base)+len(m.opts.Fixed))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !fixed[k] {
			out = append(out, kv)
		}
	}
	return append(out, m.opts.Fixed...)
}

// limitedWriter keeps the first n bytes written to it and discards the
// rest, so a profile that prints without end cannot fill memory.
type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
