package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sandboxExecPath is macOS's command that runs a program under a Seatbelt
// profile.
const sandboxExecPath = "/usr/bin/sandbox-exec"

// check says whether macOS can enforce p: a mode other than None, or no
// network, needs sandbox-exec, and a profile of this package that it
// accepts.
func check(p Policy) error {
	if !p.isolated() {
		return nil
	}
	if _, err := os.Stat(sandboxExecPath); err != nil {
		return fmt.Errorf("%w: %s is missing (%v): macOS confines commands with it", ErrUnsupported, sandboxExecPath, err)
	}
	return probeSeatbelt()
}

// probeSeatbelt runs true under a confined profile once per process, so
// that a macOS whose sandbox-exec refuses the profiles written here makes
// Check fail (and the default mode none) instead of every command.
var probeSeatbelt = sync.OnceValue(func() error {
	profile, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkNone, Writable: []string{resolve(os.TempDir())}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sandboxExecPath, "-p", profile, "/usr/bin/true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s refused a confined profile: %v: %s", ErrUnsupported, sandboxExecPath, err, strings.TrimSpace(string(out)))
	}
	return nil
})

// host is what an environment holds on macOS: its temporary directory,
// its Seatbelt profile and, with NetworkProxy, a loopback listener that
// forwards to the service's egress proxy.
type host struct {
	tmp     string
	profile string
	proxy   net.Listener
}

// start prepares the environment's temporary directory, proxy and
// profile.
func (h *host) start(p Policy) error {
	if !p.isolated() {
		return nil
	}
	spec := SeatbeltSpec{Mode: p.Mode, Network: p.Network}
	if p.Mode != None {
		tmp, err := os.MkdirTemp("", "penguin-env-")
		if err != nil {
			return fmt.Errorf("the environment's temporary directory: %w", err)
		}
		h.tmp = resolve(tmp)
		spec.Writable = append(spec.Writable, h.tmp)
		if p.Mode == WorkspaceWrite {
			spec.Writable = append(spec.Writable, resolve(p.Workspace))
		}
		for _, w := range p.WritablePaths {
			if _, err := os.Stat(w); err == nil {
				spec.Writable = append(spec.Writable, resolve(w))
			}
		}
		for _, hp := range p.HidePaths {
			spec.Hidden = append(spec.Hidden, resolve(hp))
		}
	}
	if p.Network == NetworkProxy {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("the environment's egress proxy listener: %w", err)
		}
		h.proxy = l
		spec.ProxyPort = l.Addr().(*net.TCPAddr).Port
		go h.forward(p.ProxySocket)
	}
	profile, err := SeatbeltProfile(spec)
	if err != nil {
		return err
	}
	h.profile = profile
	return nil
}

// maxProxyConns bounds the connections the environment's proxy forwards
// at once.
const maxProxyConns = 256

// forward relays each connection to the environment's proxy port to the
// service's egress proxy, which allows public addresses only.
func (h *host) forward(socket string) {
	slots := make(chan struct{}, maxProxyConns)
	for {
		c, err := h.proxy.Accept()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = c.Close()
			continue
		}
		go func() {
			defer func() { <-slots }()
			defer c.Close()
			up, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, c)
				_ = up.(*net.UnixConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(c, up)
			_ = c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// wrap makes cmd start under sandbox-exec with the environment's profile,
// and points its TMPDIR and proxy variables at what the environment has.
func (h *host) wrap(cmd *exec.Cmd) error {
	if h.profile == "" {
		return nil
	}
	path := cmd.Path
	if cmd.Err != nil {
		return cmd.Err
	}
	args := append([]string{sandboxExecPath, "-p", h.profile, "--", path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = sandboxExecPath, args
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if h.tmp != "" {
		cmd.Env = setEnv(cmd.Env, "TMPDIR", h.tmp+"/")
	}
	if h.proxy != nil {
		proxy := "http://127.0.0.1:" + strconv.Itoa(h.proxy.Addr().(*net.TCPAddr).Port)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			cmd.Env = setEnv(cmd.Env, k, proxy)
		}
	}
	return nil
}

// setEnv returns env with key set to value, replacing any earlier value.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// close stops the proxy and removes the temporary directory.
func (h *host) close() error {
	var errs []error
	if h.proxy != nil {
		errs = append(errs, h.proxy.Close())
	}
	if h.tmp != "" && filepath.IsAbs(h.tmp) {
		errs = append(errs, os.RemoveAll(h.tmp))
	}
	return errors.Join(errs...)
}
