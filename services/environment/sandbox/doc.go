// Package sandbox launches, confines and ends the commands of an
// environment. Every command the environment service runs goes through it,
// so that a timeout or an abort ends everything the command started, and a
// sandbox mode either holds or refuses to start. It is Linux only.
//
// # API
//
//   - Check(p) says whether this host can enforce a Policy. Call it in
//     CreateEnvironment; an error wraps ErrUnsupported and names the
//     missing kernel feature (map it to FAILED_PRECONDITION). Mode None
//     without NoNetwork always passes. A sandbox is never downgraded.
//   - Apply(cmd, p, self) prepares an unstarted *exec.Cmd and returns the
//     *Group that tracks it. self is the penguin binary ("/proc/self/exe").
//   - Group.Kill, Group.Alive, Group.Wait(ctx), Group.Release end and
//     observe everything the command started.
//   - Confine(cmd, p, self) is Apply without the per-command cgroup, for a
//     launcher that cannot keep a Group; it tracks by KillGroup & co.
//   - KillGroup(pid), GroupAlive(pgid) and WaitGroupGone(ctx, pgid) do the
//     same by process group and session, without a Group.
//   - SweepCgroups() removes what a crashed service left behind; call it
//     once at service start. CgroupParent() says where per-command cgroups
//     go, or why there are none (log it at start). Released cgroups that
//     emptied are kept for the next commands (a fresh one makes clone3
//     several times slower); DrainCgroupPool() removes them at shutdown.
//   - SandboxExec(args) is the hidden "penguin sandbox-exec" subcommand;
//     on error the binary exits with ExitCode (126).
//
// A command's life with this package:
//
//	cmd := exec.CommandContext(ctx, "bash", "-lc", line)
//	cmd.Dir, cmd.Env = workdir, env
//	g, err := sandbox.Apply(cmd, policy, "/proc/self/exe")
//	if err != nil { ... }
//	defer g.Release()                           // after cmd.Wait
//	cmd.Cancel = g.Kill                         // ctx end kills the whole tree, not just bash
//	cmd.WaitDelay = time.Second                 // don't hang on pipes held by stragglers
//	f, err := pty.Start(cmd)                    // or cmd.Start(); both keep Apply's settings
//	...
//	_ = g.Kill()                                // on timeout or abort
//	_ = cmd.Wait()
//	_ = g.Wait(waitCtx)                         // proves nothing of it remains
//
// # How commands are confined
//
// Landlock restricts the thread that enables it, and Go cannot run code
// between fork and exec, so a confined command is started as
// "penguin sandbox-exec --mode M --workspace W --writable P... [--no-network]
// -- PATH ARGS...": the trampoline applies Landlock to its own thread and
// replaces itself with the command, which inherits the restriction and
// cannot lift it. The Landlock config is strict (never best-effort): it
// handles every right that changes the file system (write, truncate,
// create, remove, rename and link across directories) and none that reads,
// so reading and executing stay allowed everywhere. Write rights are
// granted beneath the workspace (WorkspaceWrite only), beneath each
// writable path, and on /dev/null, /dev/zero, /dev/full, /dev/tty,
// /dev/random, /dev/urandom and /dev/pts (so /dev/stdout works on a
// terminal). ABI v3 is the minimum (MinLandlockABI): below it truncate(2)
// outside the workspace could not be stopped.
//
// NoNetwork starts the command in a new network namespace (CLONE_NEWNET;
// the service runs as root, and Check proved it is permitted). The
// namespace has no route anywhere; the trampoline checks that it really is
// in a namespace other than its parent's and brings its own loopback up,
// so servers and clients inside the sandbox can still use 127.0.0.1.
//
// # How commands are ended
//
// Every command starts as the leader of a new session and process group
// (Setsid: it also suits a pseudo-terminal, which needs Setsid and
// Setctty). Its first process gets SIGKILL if the thread that started it
// dies (Pdeathsig). Where a cgroup v2 hierarchy is writable (kernel 5.14 or
// later), each command is also born into a cgroup of its own through clone3
// CLONE_INTO_CGROUP, and Group.Kill writes cgroup.kill: the kernel kills
// every process in it at once, daemons that called setsid and lost their
// parent included, and a Landlock-confined command cannot move itself out
// (that is a file write). That is the robust way, and it is chosen whenever
// available. Without it, the command is tracked by its process group, its
// session, and the descendants of both: KillGroup freezes that set with
// SIGSTOP until no new member appears, then kills it, which catches job-
// control groups and setsid children whose parent still runs, but not a
// double-forked daemon.
//
// # Limits
//
//   - Landlock does not cover chmod, chown, utime or extended attributes
//     outside the workspace, writes through file descriptors inherited
//     from the service, or signals and abstract Unix sockets towards
//     processes outside the sandbox (ABI v6 scoping is not used, so that
//     v3 kernels work). Run the service with least privilege as well.
//   - Writes to $HOME (caches, shell history) fail under WorkspaceWrite
//     unless its directories are listed in WritablePaths; /dev/shm is not
//     writable unless listed.
//   - Mode None with root privileges can leave its cgroup; confined modes
//     cannot.
//   - Pdeathsig reaches only a command's first process; SweepCgroups at
//     the next start ends the rest. Pdeathsig fires when the starting OS
//     thread exits, so do not start commands from a goroutine that locked
//     its thread and ends without unlocking it.
//   - Process ids are recycled (pid_max may be 32768). KillGroup and
//     GroupAlive act on whatever holds the id now; Group remembers when its
//     command was seen gone and never kills by id after that.
//   - Do not replace cmd.SysProcAttr after Apply; with pty.StartWithAttrs
//     pass cmd.SysProcAttr itself.
package sandbox
