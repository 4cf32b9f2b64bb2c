package k8s

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// TestConfinement runs two sessions on one environment pod, in the
// sandbox the deployment gives environments that do not ask for one, and
// has session A's command try everything the sandbox must stop while
// session B's command runs: B's workspace, B's processes, the token the
// pod mounts, the environment service's ports on loopback and on the
// pod's address, the llm pod, cloud metadata, root, writes outside the
// workspace, and memory and processes beyond the environment's limits.
// Every attempt must fail, B's task must complete untouched, what a
// normal command needs (its workspace, its /tmp, git) must still work,
// and the pod must refuse sandbox mode none.
//
// It runs before TestDeployment (files in name order), on the one
// environment pod of the freshly applied overlay.
func TestConfinement(t *testing.T) {
	c := setup(t)
	ctx := testkit.Context(t, 5*time.Minute)
	pod := c.waitReady(t, envDeploy, 1)[0]
	token, err := os.ReadFile(os.Getenv("PENGUIN_K8S_TOKEN_FILE"))
	if err != nil {
		t.Fatal(err)
	}

	a := c.newSession(ctx, t, "conf-a")
	b := c.newSession(ctx, t, "conf-b")

	// A's normal work: its workspace and /tmp, as the workspaces' owner.
	res := c.completed(ctx, t, a, "CONF-A: do some ordinary work")
	if out := res.text(); !strings.Contains(out, "CA-OK") || !strings.Contains(out, "uid=65532") || !strings.Contains(out, "tmp-ok") {
		t.Fatalf("an ordinary command failed in the sandbox (or did not run as 65532):\n%s", out)
	}
	if got := c.kubectl(t, "exec", pod, "--", "stat", "-c", "%u:%g %n", "/workspaces/conf-a/mine.txt", "/workspaces/conf-a/sub/mine.txt"); strings.Count(got, "65532:65532 ") != 2 {
		t.Fatalf("A's files on the volume: %q, want both owned by 65532", got)
	}

	rb := c.start(ctx, t, b, "CONF-B: keep a secret while working")
	rb.waitOutput(t, "CB-STARTED", time.Minute)
	bPID := c.kubectl(t, "exec", pod, "--", "pgrep", "-f", "^CB-WORKER")
	if bPID == "" || strings.ContainsAny(bPID, " \n") {
		t.Fatalf("B's worker in the pod: %q, want one process", bPID)
	}
	podIP := c.kubectl(t, "get", "pod", pod, "-o", "jsonpath={.status.podIP}")
	llm := c.pods(t, "penguin-llm")
	if len(llm) == 0 {
		t.Fatal("no llm pod")
	}
	targets := fmt.Sprintf("export B_PID=%s POD_IP=%s LLM_IP=%s\n", bPID, podIP, llm[0].Status.PodIP)
	c.kubectl(t, "exec", pod, "--", "sh", "-c", "printf '%s' \"$1\" > /workspaces/conf-a/targets.env", "sh", targets)

	res = c.completed(ctx, t, a, "CONF-ATTACK: try to reach beyond your environment")
	out := res.text()
	t.Logf("A's attempts:\n%s", out)
	if !strings.Contains(out, "CONF-ATTACK-END") {
		t.Fatalf("the attack script did not run to its end:\n%s", out)
	}
	if strings.Contains(out, "ESCAPED") {
		t.Errorf("a command reached beyond its environment:\n%s", out)
	}
	if n := strings.Count(out, "held: "); n != 16 {
		t.Errorf("%d attempts reported, want 16", n)
	}
	if tok := strings.TrimSpace(string(token)); strings.Contains(out, tok) {
		t.Errorf("the token appeared in A's output")
	}
	for _, limit := range []string{"the environment's memory limit", "the environment's process limit"} {
		if !strings.Contains(out, limit) {
			t.Errorf("no note that %s was reached", limit)
		}
	}

	// Sandbox mode none, asked of the pod directly with the service's
	// token, is refused: its commands would run as the service.
	conn, err := grpcclient.New(podIP+":7422", grpcclient.Options{Token: strings.TrimSpace(string(token))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = penguinv1.NewEnvironmentServiceClient(conn).CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{
		Workspace: "conf-none", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("CreateEnvironment of sandbox mode none on the pod: %v, want FailedPrecondition", err)
	}

	rbRes := rb.wait(t, 2*time.Minute)
	rbRes.requireCompleted(t)
	bOut := rbRes.text()
	if !strings.Contains(bOut, "b-secret") || !strings.Contains(bOut, "CB-DONE") || strings.Contains(bOut, "pwned") {
		t.Errorf("B's task was disturbed:\n%s", bOut)
	}
	for _, o := range rbRes.outputs() {
		if o.GetStopReason() == penguinv1.StopReason_STOP_REASON_FAILED {
			t.Errorf("B's command failed: %s", o.GetOutput())
		}
	}
	if got := c.kubectl(t, "exec", pod, "--", "ls", "-A", "/workspaces/conf-b"); strings.Contains(got, "pwned") || !strings.Contains(got, "secret.txt") {
		t.Errorf("B's workspace holds %q", got)
	}
}
