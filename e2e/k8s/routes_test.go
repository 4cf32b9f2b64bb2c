package k8s

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// llmDeploy is the llm service's Deployment, two replicas in the dev
// overlay.
const llmDeploy = "penguin-llm"

// addRouteThroughWebForm adds the provider route name through the HTTP
// route the web app's form posts to (POST /api/setup/provider on the
// engine Service's HTTP port), with the scripted model's key read from
// its Secret, and returns the route as the gateway answered it.
func (c *cluster) addRouteThroughWebForm(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	enc := c.kubectl(t, "get", "secret", "penguin-providers", "-o", "jsonpath={.data.mock-api-key}")
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) == 0 {
		t.Fatalf("the scripted model's key from the Secret: %q, %v", enc, err)
	}
	form, _ := json.Marshal(map[string]any{
		"name": name, "type": "openai", "base_url": "http://penguin-mockllm:7429/v1",
		"api_key": string(key), "models": []string{"scripted"},
	})
	ip := c.kubectl(t, "get", "service", engineDeploy, "-o", "jsonpath={.spec.clusterIP}")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ip+":7480/api/setup/provider", bytes.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST /api/setup/provider: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/setup/provider: %s: %s", resp.Status, body)
	}
	if strings.Contains(string(body), string(key)) {
		t.Fatalf("the answer shows the key in the clear: %s", body)
	}
	return string(body)
}

// requestsOf returns, for each llm pod by name, how many model requests
// it has served on the route provider, read from its /metrics.
func (c *cluster) requestsOf(ctx context.Context, t *testing.T, provider string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, p := range c.pods(t, llmDeploy) {
		if p.DeletionTimestamp != nil {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Status.PodIP+":9090/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("metrics of %s: %v", p.Name, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("metrics of %s: %v", p.Name, err)
		}
		out[p.Name] = 0
		for _, m := range families["penguin_llm_requests_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" && l.GetValue() == provider {
					out[p.Name] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// routeAddedOnOneReplicaServesOnEach: a provider route added through the
// web form reaches one llm replica (the engine's front passes the call
// on), which stores it in the route store; both replicas then serve tasks
// on it. Which replica served a task is read from the replicas' request
// counters, taken before and after each task. Last, the key re-sealing
// command runs in an llm pod as an operator would run it.
func (c *cluster) routeAddedOnOneReplicaServesOnEach(ctx context.Context, t *testing.T) {
	pods := c.waitReady(t, llmDeploy, 2)
	const route = "webform"
	if before := c.requestsOf(ctx, t, route); before[pods[0]]+before[pods[1]] != 0 {
		t.Fatalf("requests on %q before it was added: %v", route, before)
	}
	answer := c.addRouteThroughWebForm(ctx, t, route)
	t.Logf("the gateway added the route: %s", answer)
	// Every replica polls the route store's version every second; two
	// seconds on, each must serve the route.
	time.Sleep(2 * time.Second)
	// Engines spread model calls over the llm pods they resolved; one
	// that resolved the headless Service before the second llm pod was
	// Ready finds it when the llm pod ends its connection
	// (PENGUIN_MAX_CONNECTION_AGE, 15 s in the dev overlay) and it
	// resolves again (at most every 30 s). Seen on the cluster: the first
	// 12 tasks, within 5 s, all on one pod.
	served := map[string]int{}
	deadline := time.Now().Add(3 * time.Minute)
	for i := 1; served[pods[0]] == 0 || served[pods[1]] == 0; i++ {
		if i > 60 || time.Now().After(deadline) {
			t.Fatalf("after %d tasks on %q, not every llm replica served one: %v", i-1, route, served)
		}
		before := c.requestsOf(ctx, t, route)
		resp, err := c.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{
			Model:        &penguinv1.ModelRef{Provider: route, ModelId: "scripted"},
			Workspace:    fmt.Sprintf("webform-%d", i),
			ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
		})
		if err != nil {
			t.Fatalf("task %d: CreateSession on the new route: %v", i, err)
		}
		res := c.completed(ctx, t, resp.GetSession().GetSessionId(), fmt.Sprintf("WEBFORM-%02d: answer through the new route", i))
		if !strings.Contains(res.text(), "WEBFORM-FINISHED") {
			t.Fatalf("task %d did not get the scripted answer:\n%s", i, res.text())
		}
		after := c.requestsOf(ctx, t, route)
		var by []string
		for _, p := range pods {
			if after[p] > before[p] {
				by = append(by, p)
				served[p]++
			}
		}
		if len(by) == 0 {
			t.Fatalf("task %d completed, but no llm replica counted a request on %q: before %v, after %v", i, route, before, after)
		}
		t.Logf("task %d served by %v", i, by)
		if served[pods[0]] == 0 || served[pods[1]] == 0 {
			time.Sleep(2 * time.Second) // the poll interval; a task is one scripted turn
		}
	}
	// The operator's re-sealing command, as the README runs it in an llm
	// pod (whose environment names the store): every key is under the
	// current secret already, so it moves none, and says so.
	out := c.kubectl(t, "exec", pods[0], "--", "/usr/local/bin/penguin", "providers", "rotate-key", "--routes-key-file=/var/run/secrets/penguin/routes/key")
	if !strings.Contains(out, "re-sealed 0 stored API keys") {
		t.Fatalf("penguin providers rotate-key in %s: %q", pods[0], out)
	}
}
