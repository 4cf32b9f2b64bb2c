package gateway

import (
	"context"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
)

// Who calls. The gateway decides nothing about users: the engine's
// access guard does (services/engine/access). The gateway's one
// middleware (authenticated) reads the client's credential, passes it on
// with every engine and llm call in the access.CredentialHeader metadata
// (so the gateway's own service token lends the client nothing), and asks
// the engine once per request who the caller is (AuthService.WhoAmI),
// refusing the request when the engine does. The credential is:
//
//   - a bearer token (a user's personal access token, or the service
//     token), sent as it is;
//   - the cookie of a user's sign-in (POST /api/auth/login with a user id
//     and password), which holds the engine's login-session secret;
//   - the cookie of a sign-in with the server's token (POST
//     /api/auth/login with {"token"}), which stands for the service token;
//   - nothing, which the engine accepts only in local mode.
//
// Browser sign-in. A browser cannot put a bearer token on an EventSource,
// and a token kept in page storage is readable by any script on the page,
// so the web app trades its credentials once for a session cookie:
//
//   - The cookie is HttpOnly (no script reads it) and SameSite=Strict (no
//     other site's page sends it), and lasts sessionTTL, renewed when more
//     than half of it has passed.
//   - A user's cookie is the engine's login session: signing out ends it
//     in the engine, and an admin's password reset ends all of a user's.
//   - A token sign-in's cookie is stateless: expiry and a random nonce,
//     signed with HMAC-SHA256 under a key derived from the token. The
//     gateway keeps no session table (nothing to bound, nothing lost on
//     restart), and changing the token invalidates every such cookie at
//     once.
//   - State-changing requests authenticated by a cookie must also carry
//     X-CSRF-Token, a value derived from the cookie (its nonce, or the
//     SHA-256 of the login session's secret) that only a same-origin page
//     can learn (from the sign-in answer or GET /api/auth); on top of that every state-changing request, cookie or
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

// auth reads credentials. The zero token and no team mode means no
// authentication.
type auth struct {
	// enabled says callers must sign in: a token is set, or the server
	// is in team mode.
	enabled bool
	// token is the service token, which a token sign-in's cookie stands
	// for.
	token  string
	digest [sha256.Size]byte
	key    []byte
	now    func() time.Time
	// failures limits wrong tokens at sign-in, so guessing is slow even
	// for a weak token.
	failures *rate.Limiter
}

func newAuth(token string, team bool, now func() time.Time) *auth {
	a := &auth{enabled: token != "" || team, token: token, now: now, failures: rate.NewLimiter(rate.Every(time.Second), 10)}
	if token != "" {
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

// userCookiePrefix starts the cookie of a user's sign-in: the engine's
// login-session secret (access.Guard.StartLoginSession).
const userCookiePrefix = "pgn_ses_"

// userCSRF is the CSRF token of a user's sign-in cookie.
func userCSRF(secret string) string {
	d := sha256.Sum256([]byte("penguin csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(d[:])
}

// credential reads an API request's credential (see the top of this
// file): a bearer token, a sign-in cookie plus, on a state-changing
// request, its CSRF token, or nothing. It renews a token sign-in's cookie
// past half its life. Without an engine to ask (legacy), a bearer token
// must be the server's.
func (a *auth) credential(w http.ResponseWriter, r *http.Request, legacy bool) (string, codes.Code, string) {
	if h := r.Header.Get("Authorization"); h != "" {
		got, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || got == "" || (legacy && a.enabled && !a.tokenMatches(got)) {
			return "", codes.Unauthenticated, "a valid bearer token is required"
		}
		return got, codes.OK, ""
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		if legacy && a.enabled {
			return "", codes.Unauthenticated, "sign in first: POST /api/auth/login, or send a bearer token"
		}
		return "", codes.OK, ""
	}
	if strings.HasPrefix(c.Value, userCookiePrefix) {
		if !safeMethod(r.Method) && subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(userCSRF(c.Value))) != 1 {
			return "", codes.PermissionDenied, "the " + csrfHeader + " header is missing or wrong"
		}
		return c.Value, codes.OK, ""
	}
	nonce, expires, ok := a.session(r)
	if !ok || a.token == "" {
		return "", codes.Unauthenticated, "your sign-in has ended; sign in again"
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(csrfHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.csrfToken(nonce))) != 1 {
			return "", codes.PermissionDenied, "the " + csrfHeader + " header is missing or wrong"
		}
	}
	if expires.Sub(a.now()) < sessionTTL/2 {
		http.SetCookie(w, a.newCookie(r, nonce))
	}
	return a.token, codes.OK, ""
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// authState is the answer of GET /api/auth and of a sign-in.
type authState struct {
	// AuthRequired says callers must sign in (a token is set, or the
	// server is in team mode).
	AuthRequired bool `json:"auth_required"`
	// SignedIn says the request carried valid credentials (or no sign-in
	// is needed).
	SignedIn bool `json:"signed_in"`
	// CSRFToken goes in the X-CSRF-Token header of state-changing requests.
	CSRFToken string `json:"csrf_token,omitempty"`
	// Mode is "local" or "team", when the engine said.
	Mode string `json:"mode,omitempty"`
	// User is the signed-in user, Operator whether the caller is the
	// operator's service token, and MustChangePassword whether the user
	// must choose a new password.
	User               *userJSON `json:"user,omitempty"`
	Operator           bool      `json:"operator,omitempty"`
	MustChangePassword bool      `json:"must_change_password,omitempty"`
	// OIDCName is the identity provider's name when one is configured:
	// the sign-in page offers "Sign in with <OIDCName>".
	OIDCName string `json:"oidc_name,omitempty"`
}

// userJSON is a user as the web app sees them.
type userJSON struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Admin bool   `json:"admin"`
}

// stateOf describes a WhoAmI answer, with the CSRF token of the
// request's cookie.
func (g *Gateway) stateOf(r *http.Request, who *penguinv1.WhoAmIResponse) authState {
	st := authState{AuthRequired: g.auth.enabled || who.GetMode() == penguinv1.ServerMode_SERVER_MODE_TEAM, SignedIn: true,
		Operator: who.GetOperator(), MustChangePassword: who.GetMustChangePassword()}
	switch who.GetMode() {
	case penguinv1.ServerMode_SERVER_MODE_TEAM:
		st.Mode = "team"
	case penguinv1.ServerMode_SERVER_MODE_LOCAL:
		st.Mode = "local"
	}
	if u := who.GetUser(); u != nil {
		st.User = &userJSON{ID: u.GetUserId(), Name: u.GetName(), Admin: u.GetAdmin()}
	}
	if c, err := r.Cookie(cookieName); err == nil {
		if strings.HasPrefix(c.Value, userCookiePrefix) {
			st.CSRFToken = userCSRF(c.Value)
		} else if nonce, _, ok := g.auth.session(r); ok {
			st.CSRFToken = g.auth.csrfToken(nonce)
		}
	}
	return st
}

// authStatus serves GET /api/auth: whether the browser must sign in, who
// it is signed in as, and the CSRF token of its session.
func (g *Gateway) authStatus(w http.ResponseWriter, r *http.Request) {
	if g.accounts == nil {
		st := authState{AuthRequired: g.auth.enabled, SignedIn: !g.auth.enabled}
		if nonce, _, ok := g.auth.session(r); ok && g.auth.enabled {
			st.SignedIn, st.CSRFToken = true, g.auth.csrfToken(nonce)
		}
		writeJSON(w, http.StatusOK, st)
		return
	}
	// Mode tells the sign-in page which form to offer first.
	out := authState{AuthRequired: true, Mode: "local"}
	if g.opts.Team {
		out.Mode = "team"
	}
	opts, err := g.accounts.GetSignInOptions(withCredential(r.Context(), ""), &penguinv1.GetSignInOptionsRequest{})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	out.OIDCName = opts.GetOidcName()
	cred, code, _ := g.auth.credential(w, r, false)
	if code != codes.OK {
		writeJSON(w, http.StatusOK, out)
		return
	}
	who, err := g.accounts.WhoAmI(withCredential(r.Context(), cred), &penguinv1.WhoAmIRequest{})
	if err != nil {
		if status.Code(err) == codes.Unauthenticated {
			writeJSON(w, http.StatusOK, out)
			return
		}
		g.fail(w, r, err)
		return
	}
	st := g.stateOf(r, who)
	st.OIDCName = out.OIDCName
	writeJSON(w, http.StatusOK, st)
}

// withCredential returns ctx whose engine and llm calls present cred, the
// client's credential, instead of the gateway's own.
func withCredential(ctx context.Context, cred string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, access.CredentialHeader, cred)
}

// loginBody is the body of POST /api/auth/login: a user's id and
// password, or the server's token.
type loginBody struct {
	UserID   string `json:"user_id"`
	Password string `json:"password"`
	Token    string `json:"token"`
}

// login serves POST /api/auth/login: a user's right password, or the
// server's token, gets a session cookie and its CSRF token.
func (g *Gateway) login(w http.ResponseWriter, r *http.Request) {
	var body loginBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || (body.Token == "") == (body.UserID == "") {
		badRequest(w, `the body must be {"user_id": "...", "password": "..."} or {"token": "<the server's token>"}`)
		return
	}
	if body.UserID != "" {
		g.userLogin(w, r, body)
		return
	}
	if !g.auth.enabled {
		writeJSON(w, http.StatusOK, authState{SignedIn: true})
		return
	}
	if g.auth.token == "" || !g.auth.tokenMatches(body.Token) {
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
	writeJSON(w, http.StatusOK, authState{AuthRequired: true, SignedIn: true, CSRFToken: g.auth.csrfToken(nonce), Operator: true})
}

// userLogin signs a user in with the engine and keeps the login session
// in the cookie.
func (g *Gateway) userLogin(w http.ResponseWriter, r *http.Request, body loginBody) {
	if g.accounts == nil {
		writeError(w, codes.Unimplemented, "this gateway has no engine to sign users in with")
		return
	}
	resp, err := g.accounts.SignIn(withCredential(r.Context(), ""), &penguinv1.SignInRequest{UserId: body.UserID, Password: body.Password})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	secret := resp.GetSessionToken()
	g.setSessionCookie(w, r, secret, resp.GetExpiresAt().AsTime())
	who, err := g.accounts.WhoAmI(withCredential(r.Context(), secret), &penguinv1.WhoAmIRequest{})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	st := g.stateOf(r, who)
	st.CSRFToken = userCSRF(secret)
	writeJSON(w, http.StatusOK, st)
}

// setSessionCookie keeps a user's login session (its secret, ending at
// exp) in the browser's session cookie.
func (g *Gateway) setSessionCookie(w http.ResponseWriter, r *http.Request, secret string, exp time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: secret, Path: "/", Expires: exp, MaxAge: int(time.Until(exp) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// logout serves POST /api/auth/logout: a user's login session ends in the
// engine, and the browser drops its cookie.
func (g *Gateway) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil && strings.HasPrefix(c.Value, userCookiePrefix) && g.accounts != nil {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(userCSRF(c.Value))) != 1 {
			writeError(w, codes.PermissionDenied, "the "+csrfHeader+" header is missing or wrong")
			return
		}
		if _, err := g.accounts.SignOut(withCredential(r.Context(), c.Value), &penguinv1.SignOutRequest{}); err != nil && status.Code(err) != codes.Unauthenticated {
			g.fail(w, r, err)
			return
		}
	}
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
