package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/gateway"
	"google.golang.org/grpc"
)

func TestBearerTokenIsRequired(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{AuthToken: "sesame-open"})
	for _, h := range []string{"", "Bearer wrong", "Bearer sesame", "Bearer sesame-open-and-more", "Basic sesame-open", "bearer sesame-open"} {
		var header []string
		if h != "" {
			header = []string{"Authorization", h}
		}
		resp, body := do(t, "GET", web.URL+"/api/sessions/s-1", "", header...)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"error":"unauthenticated"`) {
			t.Fatalf("Authorization %q: %d %s", h, resp.StatusCode, body)
		}
	}
	if resp, _ := do(t, "GET", web.URL+"/api/sessions/s-1", "", "Authorization", "Bearer sesame-open"); resp.StatusCode != http.StatusOK {
		t.Fatalf("right token: %d", resp.StatusCode)
	}
	// The app and the sign-in status need no token.
	if resp, body := do(t, "GET", web.URL+"/api/auth", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"auth_required":true`) {
		t.Fatalf("auth status: %d %s", resp.StatusCode, body)
	}
}

// browser is an HTTP client with a cookie jar, like a browser tab.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
	csrf string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, Timeout: 10 * time.Second}, base: base}
}

func (b *browser) do(method, path, body string, header ...string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, sb.String()
}

func TestBrowserSignInWithCookieAndCSRF(t *testing.T) {
	fake := strictEngine()
	fake.AttachFunc = func(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
		return s.Send(&penguinv1.AttachResponse{Event: &penguinv1.RunEvent{Sequence: 1, Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_IDLE}}}})
	}
	web := start(t, fake, gateway.Options{AuthToken: "correct horse battery staple"})
	b := newBrowser(t, web.URL)

	if resp, body := b.do("POST", "/api/auth/login", `{"token":"wrong"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, body)
	}
	resp, body := b.do("POST", "/api/auth/login", `{"token":"correct horse battery staple"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d %s", resp.StatusCode, body)
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"penguin_session=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(set, want) {
			t.Fatalf("cookie %q lacks %s", set, want)
		}
	}
	if strings.Contains(set, "correct horse") {
		t.Fatalf("the cookie carries the token: %q", set)
	}
	var st struct {
		SignedIn  bool   `json:"signed_in"`
		CSRFToken string `json:"csrf_token"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || !st.SignedIn || st.CSRFToken == "" {
		t.Fatalf("sign-in answer %s (%v)", body, err)
	}
	b.csrf = st.CSRFToken

	// Reads work with the cookie alone, the event stream included: an
	// EventSource cannot set headers.
	if resp, body := b.do("GET", "/api/sessions/s-1", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("read with the cookie: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do("GET", "/api/sessions/s-1/stream?until_idle=1", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"state":"idle"`) {
		t.Fatalf("stream with the cookie: %d %s", resp.StatusCode, body)
	}
	// A reload learns the CSRF token again from GET /api/auth.
	if _, body := b.do("GET", "/api/auth", ""); !strings.Contains(body, `"csrf_token":"`+b.csrf+`"`) {
		t.Fatalf("auth status after sign-in: %s", body)
	}
	// Writes need the CSRF token beside the cookie.
	if resp, body := b.do("POST", "/api/sessions/s-1/steer", `{"text":"x"}`); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "X-CSRF-Token") {
		t.Fatalf("write without the CSRF token: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.do("POST", "/api/sessions/s-1/steer", `{"text":"x"}`, "X-CSRF-Token", b.csrf+"x"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("write with a wrong CSRF token: %d", resp.StatusCode)
	}
	if resp, body := b.do("POST", "/api/sessions/s-1/steer", `{"text":"x"}`, "X-CSRF-Token", b.csrf); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("write with the CSRF token: %d %s", resp.StatusCode, body)
	}
	// Another site's page is refused even with everything else right.
	if resp, body := b.do("POST", "/api/sessions/s-1/steer", `{"text":"x"}`, "X-CSRF-Token", b.csrf, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site write: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do("POST", "/api/sessions/s-1/steer", `{"text":"x"}`, "X-CSRF-Token", b.csrf, "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin write: %d %s", resp.StatusCode, body)
	}

	// A cookie that was tampered with is worthless.
	u, _ := url.Parse(web.URL)
	cookies := b.c.Jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	forged := *cookies[0]
	parts := strings.Split(forged.Value, ".")
	parts[0] = "99999999999" // a later expiry, same signature
	forged.Value = strings.Join(parts, ".")
	evil := newBrowser(t, web.URL)
	evil.c.Jar.SetCookies(u, []*http.Cookie{&forged})
	if resp, _ := evil.do("GET", "/api/sessions/s-1", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %d", resp.StatusCode)
	}

	// Sign out: the cookie goes.
	if resp, _ := b.do("POST", "/api/auth/logout", "", "X-CSRF-Token", b.csrf); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp, _ := b.do("GET", "/api/sessions/s-1", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d", resp.StatusCode)
	}
}

// TestWithoutTokenOnlyLocalHostNames: with no token, a request addressed
// to another host name (a DNS-rebinding page) is refused, and a
// cross-site write is refused too.
func TestWithoutTokenOnlyLocalHostNames(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	for host, want := range map[string]int{
		"evil.example:7480":  http.StatusForbidden,
		"localhost:7480":     http.StatusOK,
		"app.localhost":      http.StatusOK,
		"127.0.0.1:7480":     http.StatusOK,
		"[::1]:7480":         http.StatusOK,
		"penguin.internal":   http.StatusForbidden,
		"192.168.10.20:7480": http.StatusOK,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", web.URL+"/api/sessions/s-1", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	if resp, body := do(t, "POST", web.URL+"/api/sessions/s-1/steer", `{"text":"x"}`, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site write without a token: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", web.URL+"/api/sessions/s-1/steer", `{"text":"x"}`, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("same-origin write without a token: %d %s", resp.StatusCode, body)
	}
}
