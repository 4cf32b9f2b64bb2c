//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkLaunch measures what launching `true` through this package
// costs, against a plain os/exec run of the same binary timed in the same
// iterations: "ratio" is launched/plain time, "extra-µs" the difference per
// command. Variants: Confine (session, parent-death signal), Apply with a
// per-command cgroup, and a workspace-write environment, its commands
// started either from its init's resident starter (as exec_command
// starts them: a request over a socket, a fork of the command from a
// thread confined once) or through the trampoline (as custom tools start
// them: one more exec of a binary, joining the environment's namespaces
// and cgroups, Landlock, the system call filter, and a fork of the
// command). "noop" launches the plain command twice and shows the noise
// floor.
func BenchmarkLaunch(b *testing.B) {
	bin, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	selfPath, err := exec.LookPath("/proc/self/exe")
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	// run times launch (which runs cmd to its end) against a plain run.
	run := func(b *testing.B, launch func(cmd *exec.Cmd) error) {
		var plain, launched time.Duration
		runPlain := func() {
			start := time.Now()
			if err := exec.Command(bin).Run(); err != nil {
				b.Fatal(err)
			}
			plain += time.Since(start)
		}
		runLaunched := func() {
			start := time.Now()
			if err := launch(exec.Command(bin)); err != nil {
				b.Fatal(err)
			}
			launched += time.Since(start)
		}
		// Alternate the order so that neither side always runs second.
		for i := 0; b.Loop(); i++ {
			if i%2 == 0 {
				runPlain()
				runLaunched()
			} else {
				runLaunched()
				runPlain()
			}
		}
		b.ReportMetric(float64(launched)/float64(plain), "ratio")
		b.ReportMetric(float64(launched-plain)/float64(b.N)/1e3, "extra-µs")
	}
	// applied runs cmd as Apply (or Env.Apply) prepared it.
	applied := func(apply func(cmd *exec.Cmd) (*Group, error)) func(cmd *exec.Cmd) error {
		return func(cmd *exec.Cmd) error {
			g, err := apply(cmd)
			if err != nil {
				return err
			}
			defer g.Release()
			return cmd.Run()
		}
	}
	// The noise floor: the same command twice, nothing applied.
	b.Run("noop", func(b *testing.B) {
		run(b, func(cmd *exec.Cmd) error { return cmd.Run() })
	})
	b.Run("confine", func(b *testing.B) {
		run(b, func(cmd *exec.Cmd) error {
			if err := (&Env{}).Confine(cmd); err != nil {
				return err
			}
			return cmd.Run()
		})
	})
	b.Run("apply-cgroup", func(b *testing.B) {
		if _, err := CgroupParent(); err != nil {
			b.Skipf("no cgroup: %v", err)
		}
		run(b, applied(Apply))
	})
	confinedEnv := func(b *testing.B) *Env {
		p := Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone}
		if err := HostProbe().Check(p); err != nil {
			b.Skipf("this host cannot confine: %v", err)
		}
		env, err := NewEnv(p, selfPath)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = env.Close() })
		awaitSpawner(env)
		return env
	}
	started := func(b *testing.B, perCommandCgroup bool) {
		env := confinedEnv(b)
		devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer devNull.Close()
		run(b, func(cmd *exec.Cmd) error {
			cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, devNull, devNull
			p, g, err := env.Start(cmd, perCommandCgroup)
			if err != nil {
				return err
			}
			defer g.Release()
			ws, err := p.Wait()
			if err == nil && ws.ExitStatus() != 0 {
				err = fmt.Errorf("exit status %d", ws.ExitStatus())
			}
			return err
		})
	}
	b.Run("workspace-write-spawner", func(b *testing.B) { started(b, true) })
	b.Run("workspace-write-spawner-pgroup", func(b *testing.B) { started(b, false) })
	b.Run("workspace-write-init-starter", func(b *testing.B) {
		spawnerOff.Store(true)
		defer spawnerOff.Store(false)
		started(b, true)
	})
	b.Run("workspace-write-trampoline", func(b *testing.B) {
		env := confinedEnv(b)
		run(b, applied(env.Apply))
	})
}
