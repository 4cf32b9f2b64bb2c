package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
)

// Browser sign-in. A browser cannot put a bearer token on an EventSource,
// and a token kept in page storage is readable by any script on the page,
// so the web app trades the token once for a session cookie:
//
//   - The cookie is HttpOnly (no script reads it) and SameSite=Strict (no
//     other site's page sends it), and lasts sessionTTL, renewed when more
//     than half of it has passed.
//   - It is stateless: expiry and a random nonce, signed with HMAC-SHA256
//     under a key derived from the token. The gateway keeps no session
//     table (nothing to bound, nothing lost on restart), and changing the
//     token invalidates every cookie at once.
//   - State-changing requests authenticated by the cookie must also carry
//     X-CSRF-Token, a value derived from the cookie's nonce that only a
//     same-origin page can learn (from the sign-in answer or GET
//     /api/auth); on top of that every state-changing request, cookie or
//     not, passes net/http's cross-origin protection (Sec-Fetch-Site and
//     Origin checks), so another site's page cannot post to the gateway
//     even when no token is set.
//
// Bearer tokens are compared as SHA-256 digests, so the comparison takes
// the same time whatever the length of the guess.

const (
	cookieName = "penguin_session"
	csrfHeader = "X-CSRF-Token"
	// sessionTTL is how long a browser stays signed in without a request.
	sessionTTL = 7 * 24 * time.Hour
)

// auth checks credentials. The zero token means no authentication.
type auth struct {
	enabled bool
	digest  [sha256.Size]byte
	key     []byte
	now     func() time.Time
	// failures limits wrong tokens at sign-in, so guessing is slow even
	// for a weak token.
	failures *rate.Limiter
}

func newAuth(token string, now func() time.Time) *auth {
	a := &auth{enabled: token != "", now: now, failures: rate.NewLimiter(rate.Every(time.Second), 10)}
	if a.enabled {
		a.digest = sha256.Sum256([]byte(token))
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte("penguin gateway session cookie"))
		a.key = mac.Sum(nil)
	}
	return a
}

// tokenMatches compares a presented token with the configured one in time
// independent of both.
func (a *auth) tokenMatches(got string) bool {
	d := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(d[:], a.digest[:]) == 1
}

func (a *auth) sign(parts ...string) string {
	mac := hmac.New(sha256.New, a.key)
	mac.Write([]byte(strings.Join(parts, ".")))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// csrfToken is the value state-changing requests carry beside the cookie
// with the given nonce.
func (a *auth) csrfToken(nonce string) string { return a.sign("csrf", nonce) }

// newCookie returns a session cookie for nonce, valid for sessionTTL.
func (a *auth) newCookie(r *http.Request, nonce string) *http.Cookie {
	exp := a.now().Add(sessionTTL)
	e := strconv.FormatInt(exp.Unix(), 10)
	return &http.Cookie{
		Name: cookieName, Value: e + "." + nonce + "." + a.sign("session", e, nonce),
		Path: "/", Expires: exp, MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// session reads a valid session cookie: its nonce and expiry.
func (a *auth) session(r *http.Request) (nonce string, expires time.Time, ok bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return "", time.Time{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return "", time.Time{}, false
	}
	want := a.sign("session", parts[0], parts[1])
	if subtle.ConstantTimeCompare([]byte(want), []byte(parts[2])) != 1 {
		return "", time.Time{}, false
	}
	sec, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	expires = time.Unix(sec, 0)
	if !a.now().Before(expires) {
		return "", time.Time{}, false
	}
	return parts[1], expires, true
}

// check authenticates an API request: a bearer token, or a session cookie
// plus, on a state-changing request, the CSRF token. It renews a cookie
// past half its life.
func (a *auth) check(w http.ResponseWriter, r *http.Request) (codes.Code, string) {
	if !a.enabled {
		return codes.OK, ""
	}
	if h := r.Header.Get("Authorization"); h != "" {
		got, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || !a.tokenMatches(got) {
			return codes.Unauthenticated, "a valid bearer token is required"
		}
		return codes.OK, ""
	}
	nonce, expires, ok := a.session(r)
	if !ok {
		return codes.Unauthenticated, "sign in first: POST /api/auth/login with the server's token, or send it as a bearer token"
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(csrfHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.csrfToken(nonce))) != 1 {
			return codes.PermissionDenied, "the " + csrfHeader + " header is missing or wrong"
		}
	}
	if expires.Sub(a.now()) < sessionTTL/2 {
		http.SetCookie(w, a.newCookie(r, nonce))
	}
	return codes.OK, ""
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// authState is the answer of GET /api/auth and of a sign-in.
type authState struct {
	// AuthRequired says the gateway has a token, so a browser must sign in.
	AuthRequired bool `json:"auth_required"`
	// SignedIn says the request carried a valid session cookie (or no
	// sign-in is needed).
	SignedIn bool `json:"signed_in"`
	// CSRFToken goes in the X-CSRF-Token header of state-changing requests.
	CSRFToken string `json:"csrf_token,omitempty"`
}

// authStatus serves GET /api/auth: whether the browser must sign in, and
// the CSRF token of its session when it is signed in.
func (g *Gateway) authStatus(w http.ResponseWriter, r *http.Request) {
	st := authState{AuthRequired: g.auth.enabled, SignedIn: !g.auth.enabled}
	if nonce, _, ok := g.auth.session(r); ok && g.auth.enabled {
		st.SignedIn, st.CSRFToken = true, g.auth.csrfToken(nonce)
	}
	writeJSON(w, http.StatusOK, st)
}

// login serves POST /api/auth/login {"token": "..."}: a right token gets a
// session cookie and its CSRF token.
func (g *Gateway) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Token == "" {
		badRequest(w, `the body must be {"token": "<the server's token>"}`)
		return
	}
	if !g.auth.enabled {
		writeJSON(w, http.StatusOK, authState{SignedIn: true})
		return
	}
	if !g.auth.tokenMatches(body.Token) {
		if !g.auth.failures.Allow() {
			writeError(w, codes.ResourceExhausted, "too many wrong tokens; wait a moment")
			return
		}
		writeError(w, codes.Unauthenticated, "that is not the server's token")
		return
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	nonce := hex.EncodeToString(raw[:])
	http.SetCookie(w, g.auth.newCookie(r, nonce))
	writeJSON(w, http.StatusOK, authState{AuthRequired: true, SignedIn: true, CSRFToken: g.auth.csrfToken(nonce)})
}

// logout serves POST /api/auth/logout: the browser drops its cookie.
func (g *Gateway) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.WriteHeader(http.StatusNoContent)
}

// errRebinding explains the refusal of checkHost.
var errRebinding = errors.New("without an auth token the gateway answers only requests addressed to localhost or an IP address, " +
	"so that another site cannot reach it by pointing a host name of its own at this machine (DNS rebinding); " +
	"set PENGUIN_AUTH_TOKEN to serve it under a host name")

// checkHost refuses, when no token is set, a request addressed to a host
// name other than localhost: with no credential to protect it, the Host
// header is what tells a page of this origin from one of a rebound name.
func (a *auth) checkHost(r *http.Request) error {
	if a.enabled {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return nil
	}
	return errRebinding
}
