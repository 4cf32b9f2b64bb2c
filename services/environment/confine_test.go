package environment_test

// The attack suite of the confinement: each test is an attack made through
// ExecuteTool exactly as a model would make it (a command, sometimes one
// that runs a program the model put into the workspace), against a real
// service on a loopback port, and checks that nothing escapes. The
// numbers are those of the attack table in docs/security.md; the
// file-level attacks are in security_test.go.

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/egress"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// probes are programs an attacking model could write into its workspace
// and run; the test binary plays them, copied into the workspace.
var probes = map[string]func(args []string) int{
	// probe-dial NETWORK ADDRESS: print "connected" or the error.
	"probe-dial": func(args []string) int {
		c, err := net.DialTimeout(args[0], args[1], 3*time.Second)
		if err != nil {
			fmt.Printf("%s %s: %v\n", args[0], args[1], err)
			return 3
		}
		c.Close()
		fmt.Printf("%s %s: connected\n", args[0], args[1])
		return 0
	},
	// probe-forkstorm N: start N sleeping processes, print how many
	// started, and end them.
	"probe-forkstorm": func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		var started []*exec.Cmd
		for range n {
			c := exec.Command("/bin/sleep", "30")
			if c.Start() == nil {
				started = append(started, c)
			}
		}
		fmt.Printf("started %d of %d\n", len(started), n)
		for _, c := range started {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		return 0
	},
	// probe-ptrace PID: try to attach to PID.
	"probe-ptrace": func(args []string) int {
		pid, _ := strconv.Atoi(args[0])
		if err := ptraceAttach(pid); err != nil {
			fmt.Printf("ptrace %d: %v\n", pid, err)
			return 3
		}
		fmt.Printf("ptrace %d: attached\n", pid)
		return 0
	},
}

// plantProbe copies the test binary into the workspace as a model could
// write a program there, and returns its path.
func plantProbe(t *testing.T, ws string) string { return proctest.SelfIn(t, ws, "probe") }

// cmd is the arguments of exec_command for a command line.
func cmd(line string) string { return args(map[string]any{"cmd": line}) }

// grpcFrame is a request body as gRPC sends it: uncompressed, length
// prefixed.
func grpcFrame(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(b)))
	return append(frame, b...)
}

// listeningUnixSockets lists the path-bound Unix sockets that listen on
// this host (PostgreSQL's and MySQL's here), from /proc/net/unix.
func listeningUnixSockets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 8 && f[3] == "00010000" && strings.HasPrefix(f[7], "/") {
			out = append(out, f[7])
		}
	}
	return out
}

// Attack 1: a command reaches the environment service (or another service
// of the host) and has it do what the sandbox forbids. It posts a
// CreateEnvironment of sandbox mode none to the service's own port, as
// gRPC would; tries the port, the host's listening Unix sockets and an
// abstract socket; looks for the auth token in its environment and in the
// token files; and looks at the service's process. Each sandbox mode is
// tried; what mode none leaves open is asserted too, as docs/security.md
// says.
func TestAttack1CommandsCannotReachTheService(t *testing.T) {
	requireConfinement(t)
	const token = "penguin-attack-token-6f1d2a"
	secrets := outsideDir(t)
	private := filepath.Join(secrets, "token-0600")
	hidden := filepath.Join(secrets, "token-0644")
	if err := os.WriteFile(private, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hidden, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, environment.Options{HidePaths: []string{hidden}, Env: proctest.Env(t, "PENGUIN_AUTH_TOKEN="+token)})
	port := h.port()
	abstract, err := net.Listen("unix", "@penguin-attack-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	sockets := listeningUnixSockets(t)
	t.Logf("the host's listening Unix sockets: %q", sockets)

	for _, mode := range []struct {
		name    string
		req     *penguinv1.CreateEnvironmentRequest
		confine bool // uid, PID and mount namespace: the files and /proc are out of reach too
	}{
		{"workspace-write", &penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE}, true},
		{"read-only", &penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY}, true},
		{"default", &penguinv1.CreateEnvironmentRequest{}, true},
		{"none without network", &penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE, Network: penguinv1.NetworkAccess_NETWORK_ACCESS_NONE}, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			resp := h.create(mode.req)
			env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
			probe := plantProbe(t, ws)
			pwned := "pwned-" + strings.ReplaceAll(mode.name, " ", "-")
			body := grpcFrame(t, &penguinv1.CreateEnvironmentRequest{Workspace: pwned, SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
			if err := os.WriteFile(filepath.Join(ws, "req.bin"), body, 0o644); err != nil {
				t.Fatal(err)
			}
			r := h.exec(env, "exec_command", cmd(fmt.Sprintf(
				`curl -sS -m 5 --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' -H 'authorization: Bearer %s' --data-binary @req.bin -o /dev/null -w 'http %%{http_code}\n' http://127.0.0.1:%d/penguin.v1.EnvironmentService/CreateEnvironment`, token, port)))
			if _, err := os.Stat(filepath.Join(h.root, pwned)); err == nil {
				t.Fatalf("the command had the service create an unconfined environment:\n%s", r.text())
			}
			if !strings.Contains(r.text(), "Failed to connect") && !strings.Contains(r.text(), "Couldn't connect") {
				t.Errorf("curl reached the service's port:\n%s", r.text())
			}
			r = h.exec(env, "exec_command", cmd(fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED; "%s" probe-dial unix %s`, port, probe, abstract.Addr())))
			if strings.Contains(r.text(), "CONNECTED") || strings.Contains(r.text(), ": connected") {
				t.Errorf("the service's port or the host's abstract socket was reached:\n%s", r.text())
			}
			r = h.exec(env, "exec_command", cmd(`env | grep -c `+token+`; echo "[$(cat `+hidden+`)]"; cat `+private))
			if !strings.HasPrefix(r.text(), "0\n") {
				t.Errorf("the auth token is in the command's environment:\n%s", r.text())
			}
			if hiddenOK := strings.Contains(r.text(), "[]"); hiddenOK != mode.confine {
				t.Errorf("the hidden token file looks empty: %v, want %v (only confined commands have a view of the files of their own):\n%s", hiddenOK, mode.confine, r.text())
			}
			if strings.Contains(r.text(), token) != !mode.confine {
				t.Errorf("the token file of mode 0600 readable: %v, want %v (only an unconfined command runs as the service's user):\n%s", strings.Contains(r.text(), token), !mode.confine, r.text())
			}
			svc := strconv.Itoa(os.Getpid())
			if !mode.confine {
				// An unconfined command reaches the host's sockets
				// and the service's process (it could stop the service
				// with ptrace, which this test leaves alone).
				r := h.exec(env, "exec_command", cmd(`kill -0 `+svc+` && echo SIGNALLED`))
				wantStop(t, r, ok, "SIGNALLED")
				return
			}
			for _, s := range sockets {
				r := h.exec(env, "exec_command", cmd(fmt.Sprintf(`"%s" probe-dial unix %s`, probe, s)))
				if strings.Contains(r.text(), ": connected") {
					t.Errorf("the host's socket %s was reached:\n%s", s, r.text())
				}
			}
			r = h.exec(env, "exec_command", cmd(`cat /proc/`+svc+`/environ >/dev/null && echo READ; kill -0 `+svc+` && echo SIGNALLED; "`+probe+`" probe-ptrace `+svc))
			if strings.Contains(r.text(), "READ") || strings.Contains(r.text(), "SIGNALLED") || strings.Contains(r.text(), "attached") {
				t.Errorf("the service's process was reached:\n%s", r.text())
			}
		})
	}
}

// Attack 5: a confined command acts with the service's powers: it changes
// the mode of a file outside, signals or traces the service or the
// environment's init, or gains root through a set-user-ID program.
func TestAttack5CommandsRunWithLessPower(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{})
	outside := outsideDir(t)
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env := resp.GetEnvironmentId()
	probe := plantProbe(t, resp.GetWorkspace())
	svc := strconv.Itoa(os.Getpid())
	r := h.exec(env, "exec_command", cmd(`id -u; chmod 777 `+victim+`; chown 65534 `+victim+`; kill -0 `+svc+`; kill -9 1; "`+probe+`" probe-ptrace 1; mount -t tmpfs none /tmp; su -c id root </dev/null; grep CapEff /proc/self/status`))
	user := podSandboxUser(t)
	if user == (sandbox.Identity{}) {
		user = sandbox.DefaultIdentity
	}
	for _, want := range []string{fmt.Sprintf("%d\n", user.UID), "Read-only file system", "No such process", "Operation not permitted", "ptrace 1: operation not permitted", "must be superuser", "CapEff:\t0000000000000000"} {
		if !strings.Contains(r.text(), want) {
			t.Errorf("output lacks %q:\n%s", want, r.text())
		}
	}
	if info, err := os.Stat(victim); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("the file outside changed: %v %v", info.Mode(), err)
	}
	if uid, err := fileUID(victim); err != nil || uid != 0 {
		t.Errorf("the file outside changed owner: %d %v", uid, err)
	}
}

// Attack 6: a fork storm and a memory hog. Each stops at the environment's
// limit, the tool output says so, and another environment and the host
// keep working.
func TestAttack6LimitsHoldAndAreReported(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{Limits: sandbox.Limits{Pids: 64, Memory: 64 << 20}})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env := resp.GetEnvironmentId()
	other := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	probe := plantProbe(t, resp.GetWorkspace())

	r := h.exec(env, "exec_command", cmd(`"`+probe+`" probe-forkstorm 300`))
	var started, asked int
	if _, err := fmt.Sscanf(r.text(), "started %d of %d", &started, &asked); err != nil || started >= 64 {
		t.Errorf("a fork storm of 300 under a limit of 64:\n%s", r.text())
	}
	if !strings.Contains(r.text(), "[the environment's process limit (64) was reached") {
		t.Errorf("the output does not report the process limit:\n%s", r.text())
	}
	wantStop(t, h.exec(other, "exec_command", cmd(`for i in $(seq 50); do true & done; wait; echo alive`)), ok, "alive")
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Errorf("the host cannot start a process after the storm: %v", err)
	}

	r = h.exec(env, "exec_command", cmd(`x=$(head -c 300000000 /dev/zero | tr '\0' a); echo "survived ${#x}"`))
	if strings.Contains(r.text(), "survived 300000000") {
		t.Errorf("a 300 MB hog survived a 64 MiB limit:\n%s", r.text())
	}
	if !strings.Contains(r.text(), "[the environment's memory limit (64 MiB) was reached: the kernel killed") {
		t.Errorf("the output does not report the memory limit:\n%s", r.text())
	}
	wantStop(t, h.exec(other, "exec_command", cmd(`echo alive`)), ok, "alive")
	wantStop(t, h.exec(env, "exec_command", cmd(`echo recovered`)), ok, "recovered")
}

// Attack 9: with the service's root under /tmp, workspace-write must not
// open all of /tmp: other environments' workspaces (and anything else the
// host keeps there) stay out of reach, each environment's /tmp is its
// own, and read-only works there too.
func TestAttack9TmpIsPerEnvironment(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{Root: rootUnder(t, os.TempDir())})
	if !strings.HasPrefix(h.root, os.TempDir()) {
		t.Fatalf("the root %s is not under %s", h.root, os.TempDir())
	}
	a := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE})
	b := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE})
	if err := os.WriteFile(filepath.Join(b.GetWorkspace(), "b.txt"), []byte("b's"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(a.GetEnvironmentId(), "exec_command", cmd(`echo a-secret > /tmp/penguin-attack9-`+a.GetEnvironmentId()+` && echo "TMPDIR=$TMPDIR"`)), ok, "TMPDIR=/tmp")
	r := h.exec(a.GetEnvironmentId(), "exec_command", cmd(`cat `+b.GetWorkspace()+`/b.txt; echo x > `+b.GetWorkspace()+`/planted; ls `+h.scratch))
	if strings.Contains(r.text(), "b's") || strings.Count(r.text(), "No such file or directory") < 3 {
		t.Errorf("another environment's workspace or the scratch directory is in reach:\n%s", r.text())
	}
	if _, err := os.Stat(filepath.Join(b.GetWorkspace(), "planted")); err == nil {
		t.Error("a command wrote into another environment's workspace")
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), "penguin-attack9-"+a.GetEnvironmentId())); err == nil {
		t.Error("a command wrote into the host's /tmp")
	}
	r = h.exec(b.GetEnvironmentId(), "exec_command", cmd(`cat /tmp/penguin-attack9-`+a.GetEnvironmentId()))
	wantStop(t, r, failed, "No such file or directory")
	ro := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY})
	wantStop(t, h.exec(ro.GetEnvironmentId(), "exec_command", cmd(`echo t > /tmp/t && cat /tmp/t && echo w > w.txt`)), failed, "t\n", "Read-only file system")
}

// Attack 10: a device node with the numbers of a disk (or of /dev/mem),
// made in the workspace or in /tmp, would give raw access to it.
func TestAttack10DeviceNodes(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	r := h.exec(resp.GetEnvironmentId(), "exec_command", cmd(`mknod disk b 8 0; mknod /tmp/mem c 1 1; ls -l disk /tmp/mem`))
	wantStop(t, r, failed, "Operation not permitted")
	if strings.Count(r.text(), "Operation not permitted") != 2 {
		t.Errorf("a device node was made:\n%s", r.text())
	}
	if _, err := os.Lstat(filepath.Join(resp.GetWorkspace(), "disk")); err == nil {
		t.Error("a block device node exists in the workspace")
	}
}

// More ways out: leaving the environment's cgroup (and with it, its
// limits), core dumps of a crashing program, a user namespace to gain
// capabilities in, the kernel's interfaces in /proc/sys, and the
// environment's own init.
func TestAttackOtherWaysOut(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env := resp.GetEnvironmentId()
	// Every cgroup hierarchy the environment sees (v1 controllers, the
	// unified one, or v2 alone, as a host or a pod has them) is tried.
	r := h.exec(env, "exec_command", cmd(`for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do [ -e "$f" ] || continue; echo "trying $f"; echo $$ > "$f" && echo "moved into $f"; done; `+
		`echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern; unshare -U -r id; ulimit -c; bash -c 'kill -SEGV $$'; ls core* 2>&1; cat /proc/1/environ`))
	for _, want := range []string{"trying /sys/fs/cgroup/", "core_pattern: Read-only file system", "unshare: unshare failed: Operation not permitted", "\n0\n", "No such file", "/proc/1/environ: Permission denied"} {
		if !strings.Contains(r.text(), want) {
			t.Errorf("output lacks %q:\n%s", want, r.text())
		}
	}
	if strings.Contains(r.text(), "moved into") {
		t.Errorf("a command left its environment's cgroup:\n%s", r.text())
	}
	if m, _ := filepath.Glob(filepath.Join(resp.GetWorkspace(), "core*")); len(m) > 0 {
		t.Errorf("a core dump was written: %v", m)
	}
}

// The proxied network: commands reach public addresses through the
// service's egress proxy, and nothing internal, the service's own port
// included, whether they use the proxy or not.
func TestAttackProxiedNetworkRefusesInternal(t *testing.T) {
	requireConfinement(t)
	public := nonLoopbackAddr(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "public page") })}
	lis, err := net.Listen("tcp4", net.JoinHostPort(public.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	var allow []netip.Prefix
	if egress.Classify(public) != "" {
		// An internal address stands in for a public one only when
		// configuration allows it, as an operator would.
		allow = append(allow, netip.PrefixFrom(public, 32))
	}
	h := start(t, environment.Options{FetchAllow: allow})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{Network: penguinv1.NetworkAccess_NETWORK_ACCESS_PROXY})
	if resp.GetNetwork() != penguinv1.NetworkAccess_NETWORK_ACCESS_PROXY || resp.GetSandboxMode() != penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE {
		t.Fatalf("the environment applies %v, %v", resp.GetSandboxMode(), resp.GetNetwork())
	}
	env := resp.GetEnvironmentId()
	wantStop(t, h.exec(env, "exec_command", cmd(`curl -sS -m 10 http://`+lis.Addr().String()+`/`)), ok, "public page")
	r := h.exec(env, "exec_command", cmd(fmt.Sprintf(`curl -sS -m 10 -o /dev/null -w '%%{http_code}\n' --noproxy '' -x "$HTTP_PROXY" http://127.0.0.1:%d/; curl -sS -m 10 -o /dev/null -w '%%{http_code}\n' http://169.254.169.254/latest/meta-data/; curl -sS -m 5 --noproxy '*' http://%s/`, h.port(), lis.Addr())))
	// Two lines of 403 (a port number may contain "403" too).
	refused := 0
	for line := range strings.Lines(r.text()) {
		if strings.TrimSpace(line) == "403" {
			refused++
		}
	}
	if refused != 2 || strings.Contains(r.text(), "public page") || !strings.Contains(r.text(), "Failed to connect") {
		t.Errorf("the proxy let an internal address through, or a direct connection left the environment:\n%s", r.text())
	}
}

// nonLoopbackAddr returns an IPv4 address of this host that is not
// loopback, for a server that stands in for the internet.
func nonLoopbackAddr(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			return p.Addr()
		}
	}
	t.Skip("this host has no address but loopback to stand in for the internet")
	return netip.Addr{}
}
