package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// startPrivate starts a PostgreSQL server of this test process's own:
// initdb into a new directory under the system's temporary directory,
// then postgres on a free loopback port, with fsync off (the data is
// thrown away) and trust authentication. It returns the URL of its
// database "test". The server ends with the process: it is started with
// the parent-death signal SIGQUIT (immediate shutdown), from an OS thread
// kept for the process's life, since the signal follows the thread that
// started it. A directory a dead server left behind is removed by the
// next start.
//
// PostgreSQL refuses to run as root; as root, the server runs as the
// user postgres (Debian's package makes it) or else nobody.
func startPrivate() (string, error) {
	bin, err := binDir()
	if err != nil {
		return "", err
	}
	removeStale()
	dir, err := os.MkdirTemp("", stalePrefix)
	if err != nil {
		return "", err
	}
	cred, err := serverUser(dir)
	if err != nil {
		return "", err
	}
	data := filepath.Join(dir, "data")
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C", "TZ=UTC"}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Env, initdb.Dir, initdb.SysProcAttr = env, dir, &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	started := make(chan error, 1)
	go func() {
		// This thread starts the server and then never exits: the server's
		// parent-death signal is tied to it.
		runtime.LockOSThread()
		srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=200")
		srv.Env, srv.Dir = env, dir
		srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
		log, err := os.Create(filepath.Join(dir, "server.log"))
		if err == nil {
			srv.Stdout, srv.Stderr = log, log
			err = srv.Start()
		}
		started <- err
		if err == nil {
			_ = srv.Wait()
		}
		select {} // keep the thread
	}()
	if err := <-started; err != nil {
		return "", fmt.Errorf("start postgres: %w", err)
	}
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE DATABASE test")
			_ = conn.Close(ctx)
			cancel()
			if err != nil {
				return "", fmt.Errorf("create database test: %w", err)
			}
			return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", port), nil
		}
		cancel()
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return "", fmt.Errorf("the private PostgreSQL server did not answer within 30 s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond) // the poll interval while the server starts
	}
}

// stalePrefix starts the names of the private servers' directories.
const stalePrefix = "penguin-pgtest-"

// binDir finds Debian's PostgreSQL server binaries (initdb, postgres):
// the newest /usr/lib/postgresql/N/bin, else initdb's directory on PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb and postgres are missing: install Debian's postgresql package (apt-get install postgresql)")
}

// version is the major version in a /usr/lib/postgresql/N/bin path.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// serverUser returns who the server runs as (nil: this process's user)
// and gives them dir.
func serverUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL does not run as root, and neither user postgres nor nobody exists: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// removeStale removes the directories of private servers that are gone:
// their postmaster.pid names no live process, or there is none.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), stalePrefix+"*"))
	for _, d := range dirs {
		pid := 0
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		}
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue
		}
		if info, err := os.Stat(d); err == nil && time.Since(info.ModTime()) > 10*time.Minute {
			_ = os.RemoveAll(d)
		}
	}
}
