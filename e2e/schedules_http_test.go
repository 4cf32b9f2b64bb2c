package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// schedulesHTTP walks the gateway's schedule routes of an agent as a web
// client does: create (201, then 409 on the same name), a refused
// definition naming its line (400, nothing stored), list, read, update,
// run now (its session gets the prompt, with source schedule), the
// history of runs, delete, and a read after it (404).
func schedulesHTTP(t *testing.T, s *allInOne) {
	ctx := testkit.Context(t, 2*time.Minute)
	base := "http://" + s.httpAddr + "/api/projects/default/agents/default/schedules"
	call := func(method, url, body string, want int) map[string]any {
		t.Helper()
		code, data := sendJSON(ctx, t, method, url, body)
		if code != want {
			t.Fatalf("%s %s: %d: %s", method, url, code, data)
		}
		out := map[string]any{}
		if len(data) > 0 {
			if err := json.Unmarshal(data, &out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, url, err, data)
			}
		}
		return out
	}
	yaml := func(enabled bool) string {
		b, _ := json.Marshal(map[string]string{"name": "digest", "yaml": "prompt: \"HTTP-SCHEDULE: write the digest.\"\nenabled: " +
			map[bool]string{true: "true", false: "false"}[enabled] + "\ncron: \"0 9 * * 1\"\ntimezone: Asia/Tokyo\nworkspace: " + s.root +
			"\nprovider: schedules\nmodel_id: scripted\n"})
		return string(b)
	}
	created := call("POST", base, yaml(true), http.StatusCreated)
	sch, _ := created["schedule"].(map[string]any)
	if sch["name"] != "digest" || sch["enabled"] != true || sch["next_run"] == nil {
		t.Fatalf("created: %v", created)
	}
	// Monday 09:00 in Tokyo is Monday 00:00 UTC.
	if next, err := time.Parse(time.RFC3339, sch["next_run"].(string)); err != nil || next.UTC().Weekday() != time.Monday || next.UTC().Hour() != 0 {
		t.Fatalf("next run %v (%v): want a Monday 00:00 UTC", sch["next_run"], err)
	}
	if again := call("POST", base, yaml(true), http.StatusConflict); again["error"] != "already_exists" {
		t.Fatalf("a second create: %v", again)
	}
	bad, _ := json.Marshal(map[string]string{"name": "bad", "yaml": "prompt: hi\ncron: \"0 0 30 2 *\"\nworkspace: " + s.root + "\n"})
	if refused := call("POST", base, string(bad), http.StatusBadRequest); !strings.Contains(refused["message"].(string), `schedule/bad.yaml:2: cron: "0 0 30 2 *" never fires`) {
		t.Fatalf("a cadence that never fires: %v", refused)
	}
	list := call("GET", base, "", http.StatusOK)
	if all, _ := list["schedules"].([]any); len(all) != 1 {
		t.Fatalf("list: %v", list)
	}
	if got := call("GET", base+"/digest", "", http.StatusOK); !strings.Contains(got["schedule"].(map[string]any)["yaml"].(string), "Asia/Tokyo") {
		t.Fatalf("read: %v", got)
	}
	if upd := call("PUT", base+"/digest", yaml(false), http.StatusOK); upd["schedule"].(map[string]any)["enabled"] == true {
		t.Fatalf("update: %v", upd)
	}
	// Run now runs a disabled schedule too: it is a person's request.
	ran := call("POST", base+"/digest/run", "", http.StatusOK)
	session, _ := ran["run"].(map[string]any)["session_id"].(string)
	if session == "" {
		t.Fatalf("run now: %v", ran)
	}
	eventually.Within(t, time.Minute, "the run to start", func() bool {
		runs, _ := call("GET", base+"/digest/runs", "", http.StatusOK)["runs"].([]any)
		return len(runs) == 1 && runs[0].(map[string]any)["state"] == "started" && runs[0].(map[string]any)["session_id"] == session
	})
	got := call("GET", "http://"+s.httpAddr+"/api/sessions/"+session, "", http.StatusOK)
	if got["source"] != "schedule" || got["title"] != "digest" {
		t.Fatalf("the run's session: %v", got)
	}
	eventually.Within(t, time.Minute, "the model's answer in the run's session", func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.httpAddr+"/api/sessions/"+session+"/messages?after=0", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "HTTP-SCHEDULE: write the digest.") && strings.Contains(string(b), "The digest is ready.")
	})
	call("DELETE", base+"/digest", "", http.StatusOK)
	if gone := call("GET", base+"/digest", "", http.StatusNotFound); gone["error"] != "not_found" {
		t.Fatalf("read after delete: %v", gone)
	}
}
