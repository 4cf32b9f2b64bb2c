package k8s

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAttackSuiteInPod runs the host's attack suite (every TestAttack… of
// services/environment) inside an environment pod of the cluster: the
// test binary is copied into the pod and run there by its root, so each
// environment the suite makes is confined by the same code as on a host,
// but with what the pod offers (its user namespace and the capabilities
// it maps, the cgroup directories the runtime delegates, its read-only
// root, its emptyDir volumes, its /proc). Every attack must pass there,
// none may skip: a skip is a guarantee the pod could not give. The
// deployed service of the pod is attacked through sessions by
// TestConfinement; this test proves the rest of the suite holds in the
// same conditions.
//
// run.sh builds the suite statically and names it in
// PENGUIN_K8S_ATTACK_SUITE; the pod has no Go toolchain, so the sandbox
// trampoline is the image's own (PENGUIN_TEST_TRAMPOLINE).
func TestAttackSuiteInPod(t *testing.T) {
	c := setup(t)
	suite := os.Getenv("PENGUIN_K8S_ATTACK_SUITE")
	if suite == "" {
		t.Fatal("PENGUIN_K8S_ATTACK_SUITE is not set (make k8s-test builds the suite and sets it)")
	}
	pod := c.waitReady(t, envDeploy, 1)[0]

	// /home/penguin is a writable emptyDir outside /tmp, which the suite
	// needs for its "outside every workspace" directories (it makes them
	// in its working directory).
	const dir = "/home/penguin/attack-suite"
	bin, err := os.Open(suite)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	if _, err := c.podExec(t, pod, bin, 2*time.Minute, "sh", "-c",
		`rm -rf "$1" && mkdir -p "$1/home" && cat > "$1/environment.test" && chmod 0755 "$1/environment.test"`, "sh", dir); err != nil {
		t.Fatalf("copying the suite into %s: %v", pod, err)
	}
	t.Cleanup(func() { _, _ = c.podExec(t, pod, nil, time.Minute, "rm", "-rf", dir) })

	// The suite's services are configured as the pod's own is
	// (deploy/base/environment.yaml): commands run as the workspaces'
	// owner, 65532, whose workspace roots lie on the workspaces volume
	// (which the pod's user namespace maps already, so the sandbox cannot
	// map it once more).
	const roots = "/workspaces/.attack-suite"
	if _, err := c.podExec(t, pod, nil, time.Minute, "sh", "-c", `rm -rf "$1" && mkdir -m 0755 "$1"`, "sh", roots); err != nil {
		t.Fatalf("making %s: %v", roots, err)
	}
	t.Cleanup(func() { _, _ = c.podExec(t, pod, nil, time.Minute, "rm", "-rf", roots) })
	env := []string{"env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + dir + "/home", "SHELL=/bin/bash", "TMPDIR=/tmp",
		"PENGUIN_TEST_TRAMPOLINE=/usr/local/bin/penguin-sandbox",
		"PENGUIN_TEST_SANDBOX_USER=65532:65532", "PENGUIN_TEST_ROOTS=" + roots}
	inDir := func(args ...string) []string {
		return append([]string{"sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dir}, append(env, args...)...)
	}
	listed, err := c.podExec(t, pod, nil, time.Minute, inDir("./environment.test", "-test.list", "^TestAttack")...)
	if err != nil {
		t.Fatalf("listing the suite in the pod: %v\n%s", err, listed)
	}
	var want []string
	for _, f := range strings.Fields(listed) {
		if strings.HasPrefix(f, "TestAttack") {
			want = append(want, f)
		}
	}
	if len(want) < 10 {
		t.Fatalf("the suite lists %d attacks, want the whole suite:\n%s", len(want), listed)
	}

	out, err := c.podExec(t, pod, nil, 15*time.Minute, inDir("./environment.test", "-test.run", "^TestAttack", "-test.v", "-test.timeout", "14m")...)
	t.Logf("the attack suite in %s:\n%s", pod, out)
	if err != nil {
		t.Errorf("the attack suite failed in the pod: %v", err)
	}
	passed := topLevel(out, "PASS")
	for _, name := range want {
		if !slices.Contains(passed, name) {
			t.Errorf("%s did not pass in the pod", name)
		}
	}
	if skipped := regexp.MustCompile(`(?m)^\s*--- SKIP: \S+`).FindAllString(out, -1); len(skipped) > 0 {
		t.Errorf("attacks skipped in the pod (each is a guarantee the pod could not give): %v", skipped)
	}
}

// topLevel lists the top-level tests that go test -v reported with verdict
// (PASS, FAIL or SKIP).
func topLevel(out, verdict string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^--- `+verdict+`: (\S+) `).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

// podExec runs a command in pod's container with stdin (or none) and
// returns its combined output; unlike kubectl, it takes the time the
// command needs.
func (c *cluster) podExec(t *testing.T, pod string, stdin *os.File, d time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	kargs := []string{"-n", c.ns, "exec", "-c", "environment"}
	if stdin != nil {
		kargs = append(kargs, "-i")
	}
	cmd := exec.CommandContext(ctx, "kubectl", append(append(kargs, pod, "--"), args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("no end after %v: %w", d, err)
	}
	return string(out), err
}
