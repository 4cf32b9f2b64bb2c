package k8s

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// agentHTTP calls one agent route of the engine pod at ip, as the web app
// does (JSON on the HTTP port, the token as a bearer), and returns the
// decoded answer; any status but want fails the test.
func (c *cluster) agentHTTP(ctx context.Context, t *testing.T, ip, method, path string, body any, want int) map[string]any {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+ip+":7480/api/projects/default/agents"+path, in)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, ip, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s on %s: %s, want %d: %s", method, path, ip, resp.Status, want, raw)
	}
	out := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return out
}

// twoEngines waits for the two engine pods to be Ready and returns their
// addresses.
func (c *cluster) twoEngines(t *testing.T) (string, string) {
	t.Helper()
	c.waitReady(t, engineDeploy, 2)
	var ips []string
	for _, p := range c.pods(t, engineDeploy) {
		if p.DeletionTimestamp == nil && isReady(p) {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) != 2 {
		t.Fatalf("want two Ready engine pods, have %v", ips)
	}
	return ips[0], ips[1]
}

// skillArchive packs one skill directory, name/SKILL.md, as a tar.gz.
func skillArchive(t *testing.T, name, skillMD string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range []*tar.Header{
		{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: name + "/SKILL.md", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(skillMD))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write([]byte(skillMD)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// agentEditedOnOneEngineUsedOnTheOther: an agent is made and edited
// through the HTTP routes of one engine pod (A), as the web app edits it:
// its AGENTS.md (with the version read), a vault value, a skill from an
// archive and its default model. A session made on the other engine pod
// (B), called directly, without a model, runs on that model, gets that
// AGENTS.md in its system prompt, runs a command that sees the vault value
// (its length is printed, never the value) and pins the skill, which B
// must find installed. Then the same file edited on B is in the prompt of
// a session on A. Nothing is shared between the pods but PostgreSQL.
func (c *cluster) agentEditedOnOneEngineUsedOnTheOther(ctx context.Context, t *testing.T) {
	a, b := c.twoEngines(t)
	const agent = "k8s-agent"
	secret := fmt.Sprintf("k8s-vault-%d", time.Now().UnixNano())

	c.agentHTTP(ctx, t, a, http.MethodPost, "", map[string]any{"name": agent}, http.StatusCreated)
	got := c.agentHTTP(ctx, t, a, http.MethodGet, "/"+agent+"/config/AGENTS.md", nil, http.StatusOK)
	c.agentHTTP(ctx, t, a, http.MethodPut, "/"+agent+"/config/AGENTS.md",
		map[string]any{"content": "Rule AGENTS-MD-FROM-A.\n", "version": got["version"]}, http.StatusOK)
	c.agentHTTP(ctx, t, a, http.MethodPut, "/"+agent+"/vault/K8S_AGENT_TOKEN", map[string]any{"value": secret}, http.StatusOK)
	c.agentHTTP(ctx, t, a, http.MethodPost, "/"+agent+"/skills",
		map[string]any{"archive": skillArchive(t, "k8s-lint", "---\nname: k8s-lint\ndescription: Lint in the cluster.\n---\nLint.\n")}, http.StatusCreated)
	c.agentHTTP(ctx, t, a, http.MethodPut, "/"+agent+"/model",
		map[string]any{"model": map[string]string{"provider": "mock", "model_id": "scripted"}}, http.StatusOK)

	onB := e2etest.DialEngine(t, b+":7420", c.token)
	sess, err := onB.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		AgentState: agent, Workspace: "agent-k8s", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
	})
	if err != nil {
		t.Fatalf("CreateSession on B without a model: %v", err)
	}
	id := sess.GetSession().GetSessionId()
	if m := sess.GetSession().GetModel(); m.GetProvider() != "mock" || m.GetModelId() != "scripted" {
		t.Fatalf("the session on B runs on %v, not the agent's default model set on A", m)
	}
	s, err := onB.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "AGENTK8S: use the agent", Skills: []string{"k8s-lint"}})
	if err != nil {
		t.Fatalf("Run on B: %v", err)
	}
	res := follow[*penguinv1.RunResponse](s).wait(t, 2*time.Minute)
	res.requireCompleted(t)
	if want := fmt.Sprintf("AGENTK8S-VAULT-%d", len(secret)+1); !strings.Contains(res.text(), want) || !strings.Contains(res.text(), "AGENTK8S-FINISHED") {
		t.Fatalf("the task on B did not see the vault value set on A (want %q), or the skill block:\n%s", want, res.text())
	}
	if strings.Contains(res.text(), secret) {
		t.Fatal("the vault value is in the task's events")
	}
	prompt := func(engine penguinv1.EngineServiceClient, id string) string {
		for _, ev := range e2etest.History(ctx, t, engine, id) {
			if m := ev.GetMessage().GetSessionMeta(); m != nil {
				return m.GetSystemPrompt()
			}
		}
		return ""
	}
	if p := prompt(onB, id); !strings.Contains(p, "AGENTS-MD-FROM-A") || !strings.Contains(p, "k8s-lint: Lint in the cluster.") {
		t.Fatalf("the session on B lacks the AGENTS.md or the skill set on A:\n%s", p)
	}

	// And back: edited on B, used on A.
	got = c.agentHTTP(ctx, t, b, http.MethodGet, "/"+agent+"/config/AGENTS.md", nil, http.StatusOK)
	if got["content"] != "Rule AGENTS-MD-FROM-A.\n" {
		t.Fatalf("B reads AGENTS.md as %q", got["content"])
	}
	c.agentHTTP(ctx, t, b, http.MethodPut, "/"+agent+"/config/AGENTS.md",
		map[string]any{"content": "Rule AGENTS-MD-FROM-B.\n", "version": got["version"]}, http.StatusOK)
	// A write with the version B replaced is refused on A, never applied.
	c.agentHTTP(ctx, t, a, http.MethodPut, "/"+agent+"/config/AGENTS.md",
		map[string]any{"content": "Rule STALE.\n", "version": got["version"]}, http.StatusConflict)
	onA := e2etest.DialEngine(t, a+":7420", c.token)
	sessA, err := onA.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		AgentState: agent, Workspace: "agent-k8s", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
	})
	if err != nil {
		t.Fatalf("CreateSession on A: %v", err)
	}
	if p := prompt(onA, sessA.GetSession().GetSessionId()); !strings.Contains(p, "AGENTS-MD-FROM-B") {
		t.Fatalf("the session on A lacks the AGENTS.md written on B:\n%s", p)
	}
	t.Logf("edited on %s, used on %s, and back", a, b)
}
