//go:build linux

package sandbox

import (
	"os/exec"
	"testing"
	"time"
)

// BenchmarkLaunch measures what launching `true` through this package
// costs, against a plain os/exec run of the same binary timed in the same
// iterations: "ratio" is launched/plain time, "extra-µs" the difference per
// command. Variants: Confine (session, parent-death signal), Apply with a
// per-command cgroup, and a workspace-write environment (the trampoline:
// one more exec of the binary, joining the environment's namespaces and
// cgroups, Landlock, the system call filter, and a fork of the command). "noop" launches the plain command twice and
// shows the noise floor.
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
	run := func(b *testing.B, launch func(cmd *exec.Cmd) (func(), error)) {
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
			cmd := exec.Command(bin)
			release, err := launch(cmd)
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			release()
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
	// The noise floor: the same command twice, nothing applied.
	b.Run("noop", func(b *testing.B) {
		run(b, func(cmd *exec.Cmd) (func(), error) { return func() {}, nil })
	})
	b.Run("confine", func(b *testing.B) {
		run(b, func(cmd *exec.Cmd) (func(), error) { return func() {}, (&Env{}).Confine(cmd) })
	})
	b.Run("apply-cgroup", func(b *testing.B) {
		if _, err := CgroupParent(); err != nil {
			b.Skipf("no cgroup: %v", err)
		}
		run(b, func(cmd *exec.Cmd) (func(), error) {
			g, err := Apply(cmd)
			if err != nil {
				return nil, err
			}
			return func() { _ = g.Release() }, nil
		})
	})
	b.Run("workspace-write", func(b *testing.B) {
		p := Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone}
		if err := HostProbe().Check(p); err != nil {
			b.Skipf("this host cannot confine: %v", err)
		}
		env, err := NewEnv(p, selfPath)
		if err != nil {
			b.Fatal(err)
		}
		defer env.Close()
		run(b, func(cmd *exec.Cmd) (func(), error) {
			g, err := env.Apply(cmd)
			if err != nil {
				return nil, err
			}
			return func() { _ = g.Release() }, nil
		})
	})
}
