// Package sandbox launches, confines and ends the commands of an
// environment. Every command the environment service runs goes through it,
// so that a timeout or an abort ends everything the command started, and a
// sandbox either holds or refuses to start. Its confinement is Linux's
// (below); on macOS, commands are confined by Seatbelt instead (see
// SeatbeltProfile and env_darwin.go): writes beneath the workspace and
// the environment's temporary directory only, no network or only the
// egress proxy's loopback port, the hidden paths unreadable, but no
// limits, no other user and no loopback of the environment's own. Other
// systems (Windows) run commands unconfined, in mode None with the host's
// network only, and refuse every other policy. Unavailable lists what a
// system lacks, for the service to say once.
//
// # API
//
//   - Check(p) says whether this host can enforce a Policy. Call it in
//     CreateEnvironment; an error wraps ErrUnsupported and names what is
//     missing (map it to FAILED_PRECONDITION). Mode None on the host's
//     network always passes. A sandbox is never downgraded.
//   - NewEnv(p, self) starts the sandbox of one environment (self is the
//     penguin binary, "/proc/self/exe"); Env.Apply(cmd) prepares an
//     unstarted *exec.Cmd to run in it and returns the *Group that tracks
//     it; Env.Close ends every process of the environment. Env.Events and
//     Env.LimitsSince tell when its commands ran into its limits.
//   - Env.Start(cmd, perCommandCgroup) starts a command from the
//     environment's spawner, or its init's resident starter, instead
//     (confined modes;
//     Env.CanStart says whether there is one) and returns a *Process to
//     wait for with its *Group: the fast path, no process started but the
//     command.
//   - Apply(cmd) is Env.Apply for an environment that isolates nothing.
//   - Group.Kill, Group.Alive, Group.Wait(ctx), Group.Release end and
//     observe everything one command started.
//   - Env.Confine(cmd) is Apply without the per-command cgroup, for a
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
//	env, err := sandbox.NewEnv(policy, "/proc/self/exe") // once per environment
//	cmd := exec.CommandContext(ctx, "bash", "-c", line)
//	cmd.Dir, cmd.Env = workdir, env
//	g, err := env.Apply(cmd)
//	if err != nil { ... }
//	defer g.Release()                           // after cmd.Wait
//	cmd.Cancel = g.Kill                         // ctx end kills the whole tree, not just bash
//	cmd.WaitDelay = time.Second                 // don't hang on pipes held by stragglers
//	f, err := pty.StartWithAttrs(cmd, nil, cmd.SysProcAttr) // or cmd.Start(); both keep Apply's settings
//	...
//	_ = g.Kill()                                // on timeout or abort
//	_ = cmd.Wait()
//	_ = g.Wait(waitCtx)                         // proves nothing of it remains
//	_ = env.Close()                             // when the environment is disposed
//
// # How commands are confined, and why this way
//
// The threat is a model's command that reaches beyond its environment:
// the service's own gRPC port (which would create an unconfined
// environment for it), the service's credentials, other services of the
// host, other environments, the host's resources. Each confined mode
// (WorkspaceWrite, ReadOnly) stacks layers, each of which would stop most
// attacks alone:
//
//   - Namespaces of the environment's own. NewEnv starts the environment's
//     init ("sandbox-exec init") in new PID, mount, network, IPC and UTS
//     namespaces. A network namespace is the one mechanism that takes the
//     host's loopback away whatever a command does (firewall rules by uid
//     would need the host's tables changed; filtering in the service
//     would leave every other service on the loopback open); a PID
//     namespace hides the service and every other process, so nothing
//     can be signalled, traced or read through /proc. They belong to the
//     environment, not to each command, so a server one command leaves
//     running is reachable by the next, and /tmp persists between
//     commands. The init keeps them alive, reaps orphans, and with
//     NetworkProxy forwards its loopback's ProxyPort to the service's
//     egress proxy, reached through a descriptor opened before its view
//     of the files hid the proxy's socket.
//   - The environment's view of the files, made by the init: every mount
//     read-only and nosuid (one recursive mount_setattr), which also stops
//     chmod, chown and utime outside the workspace (Landlock does not);
//     the workspace mounted read-write (WorkspaceWrite) and idmapped, so
//     that the sandbox user sees its owner's files as its own and what it
//     creates belongs to that owner on disk, without a chown; fresh tmpfs
//     mounts on /tmp, /var/tmp and /dev/shm, bounded in size; /run and
//     /var/run empty, so the host's services' sockets are out of reach;
//     the hidden paths (the auth token file) empty; a read-only /proc of
//     the environment's PID namespace (a writable /proc/sys would reach
//     the host's kernel settings).
//   - Another user. Commands run as Policy.User (nobody unless
//     configured), never root: the service's files stay out of reach by
//     their permissions, and set-user-ID programs cannot lift the
//     sandbox (nosuid, no_new_privs).
//   - No capabilities. Changing from root to the sandbox user clears
//     them, and the capability bounding set is emptied first, so no
//     program the command runs can regain one.
//   - Landlock: writes only beneath the workspace (WorkspaceWrite), the
//     writable paths and the environment's temporary directories, and to
//     a few devices. The ruleset is strict (never best-effort) and needs
//     ABI 3 (MinLandlockABI), without which truncate(2) could not be
//     refused.
//   - A system call filter (seccomp, see commandPolicy) for what an agent's
//     command never needs and what would widen its reach: mounts, modules,
//     kexec, eBPF, perf events, the keyring, io_uring, user namespaces,
//     device nodes, ptrace of processes it did not start, TIOCSTI.
//   - Limits (see Limits): the environment's cgroups bound its processes,
//     memory and CPU weight together, in the cgroup v2 hierarchy where it
//     offers the pids and memory controllers and in the v1 hierarchies
//     otherwise; per process, RLIMIT_FSIZE bounds every file and
//     RLIMIT_CORE keeps core dumps (and the secrets in them) out of the
//     workspace.
//
// Landlock, the filter and the capability bounding set belong to a thread,
// and Go cannot run code between fork and exec, so a command must be
// forked from a thread that already carries them. The fast way is the
// environment's spawner (spawner.go): a process of the sandbox user that
// the trampoline puts inside every layer once, and that forks each command
// Env.Start sends it with CLONE_PARENT, so that the command is the
// service's child and its exit reaches the service directly. Until the
// spawner is ready, and after a command killed or stopped it, the init's
// resident starter (starter_init.go) serves: one thread of the init,
// confined once when the environment starts, that forks each command, which
// changes to the sandbox user in the fork; the init reaps it and reports
// its exit. Both cost what starting the command costs, where a process
// per command cost several times that. The other way, for launchers that need an
// *exec.Cmd the caller starts (Apply, Confine), is a trampoline: the
// command starts as "penguin sandbox-exec run [flags] -- PATH ARGS...",
// which joins
// the environment's cgroups, then its namespaces (setns through a pidfd of
// the init, passed as descriptor 3), applies the limits, the bounding set,
// Landlock and the filter to its own thread, and starts the command from
// that thread as the sandbox user in a session of its own (it takes the
// terminal, which is given to it). It cannot execute the command in
// place, because joining a PID namespace only places a process's
// children in it; so it stays, relays signals to the command's process
// group and exits as the command did. Mode None with NetworkNone joins
// the network namespace only, and becomes the command. Any step that
// fails stops the command before it runs, with ExitCode: the sandbox is
// never weakened to make a command run.
//
// Confined modes need the service to run as root: creating and entering
// namespaces, the idmapping's user namespace and the change of user all
// need it (Check says so otherwise). An unprivileged service offers mode
// None.
//
// # How commands are ended
//
// Every command starts as the leader of a new session and process group
// (Setsid: it also suits a pseudo-terminal, which needs Setsid and
// Setctty). Its first process (the trampoline of a confined command) gets
// SIGKILL if the thread that started it dies (Pdeathsig); the init does
// too, and its end takes the environment's PID namespace down with it.
// Where a cgroup v2 hierarchy is writable (kernel 5.14 or later), each
// command is also born into a cgroup of its own through clone3
// CLONE_INTO_CGROUP, and Group.Kill writes cgroup.kill: the kernel kills
// every process in it at once, daemons that called setsid and lost their
// parent included, and a confined command cannot move itself out (the
// cgroup files are read-only to it). That is the robust way, and it is
// chosen whenever available. Without it, the command is tracked by its
// process group, its session, and the descendants of both: KillGroup
// freezes that set with SIGSTOP until no new member appears, then kills
// it, which catches job-control groups and setsid children whose parent
// still runs, but not a double-forked daemon (Env.Close still ends it).
//
// # Limits
//
//   - Mode None is no sandbox: its commands run with the service's powers
//     and can leave their cgroup. NetworkNone alone takes the network
//     away and nothing else.
//   - Confined commands read whatever their user may read outside the
//     environment's own directories, and reach a world-writable Unix
//     socket outside /run, /var/run and /tmp by its path.
//   - The init and each trampoline run as root in the environment's
//     namespaces; the sandbox user cannot signal, trace or read them (the
//     init is not dumpable, the trampolines are outside its PID namespace).
//   - The cgroup v2 way of holding limits moves the service into a leaf of
//     its cgroup ("penguin-service") the first time, as v2 allows
//     controllers only in cgroups without processes of their own.
//   - Process ids are recycled (pid_max may be 32768). KillGroup and
//     GroupAlive act on whatever holds the id now; Group remembers when its
//     command was seen gone and never kills by id after that.
//   - Pdeathsig fires when the starting OS thread exits, so do not start
//     commands from a goroutine that locked its thread and ends without
//     unlocking it. Do not replace cmd.SysProcAttr after Apply.
package sandbox
