package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
)

// gatewayEnums sends enum numbers no contract declares through the HTTP
// gateway, which decodes a body's enums from names or numbers: the
// engine's check refuses them with 400 and the field's name, before any
// handler runs, so no session is created and a refused task leaves its
// session as it was. The gateway never shares its requests in process, so
// the check runs on every one of its calls (see internal/enumcheck).
func gatewayEnums(t *testing.T, s *allInOne) {
	ctx := testkit.Context(t, 60*time.Second)
	base := "http://" + s.httpAddr
	ws := filepath.Join(s.root, "enums-ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}

	body := fmt.Sprintf(`{"model": {"provider": "sse", "model_id": "scripted"}, "workspace": %q, "approval_mode": 42}`, ws)
	refused(ctx, t, http.MethodPost, base+"/api/sessions", body, "approval_mode: 42 is not a value of penguin.v1.ApprovalMode")
	var list struct {
		Sessions []struct {
			Workspace string `json:"workspace"`
		} `json:"sessions"`
	}
	getJSON(ctx, t, base+"/api/sessions", &list)
	for _, sess := range list.Sessions {
		if sess.Workspace == ws {
			t.Fatalf("the refused CreateSession left a session in %s", ws)
		}
	}

	var sess struct {
		SessionID    string `json:"session_id"`
		LastSequence int64  `json:"last_sequence,string"`
		ApprovalMode string `json:"approval_mode"`
	}
	postJSON(ctx, t, base+"/api/sessions", fmt.Sprintf(
		`{"model": {"provider": "sse", "model_id": "scripted"}, "workspace": %q, "approval_mode": "APPROVAL_MODE_ALLOW_ALL"}`, ws),
		http.StatusCreated, &sess)
	refused(ctx, t, http.MethodPost, base+"/api/sessions/"+sess.SessionID+"/tasks",
		`{"prompt": "count slowly", "approval_mode": 42}`, "approval_mode: 42 is not a value of penguin.v1.ApprovalMode")
	before := sess
	getJSON(ctx, t, base+"/api/sessions/"+sess.SessionID, &sess)
	if sess.LastSequence != before.LastSequence || sess.ApprovalMode != "APPROVAL_MODE_ALLOW_ALL" {
		t.Fatalf("after the refused task the session has last sequence %d (was %d) and mode %q",
			sess.LastSequence, before.LastSequence, sess.ApprovalMode)
	}
}

// refused sends body to url and wants the gateway's 400 whose message
// says want.
func refused(ctx context.Context, t *testing.T, method, url, body, want string) {
	t.Helper()
	code, data := sendJSON(ctx, t, method, url, body)
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if code != http.StatusBadRequest || json.Unmarshal(data, &e) != nil ||
		e.Error != "invalid_argument" || !strings.Contains(e.Message, want) {
		t.Fatalf("%s %s with %s: %d: %s; want 400 invalid_argument saying %q", method, url, body, code, data, want)
	}
}

// getJSON reads url's JSON answer into out, wanting 200.
func getJSON(ctx context.Context, t *testing.T, url string, out any) {
	t.Helper()
	code, data := sendJSON(ctx, t, http.MethodGet, url, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, code, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, data)
	}
}
