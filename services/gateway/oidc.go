package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Sign-in through the identity provider (the engine's package oidclogin
// does the protocol; the gateway carries the browser through it):
//
//   - GET /api/auth/oidc/start draws a secret for this browser, keeps it
//     in a short-lived HttpOnly cookie scoped to /api/auth/oidc (SameSite
//     Lax, since the provider's redirect back is a navigation from another
//     site), hands it to the engine's BeginOIDCSignIn, and redirects to
//     the provider.
//   - GET /api/auth/oidc/callback passes the provider's state and code,
//     with the cookie's secret, to CompleteOIDCSignIn, drops the cookie,
//     and sets the same login-session cookie a password sign-in gets; it
//     then redirects to the web app, with ?signin_error= when the sign-in
//     was refused. When the sign-in was started by `penguin login --oidc`,
//     the engine answers with the command-line client's loopback address
//     instead, and the browser goes there with the state and the code.

const (
	oidcCookie     = "penguin_oidc"
	oidcCookiePath = "/api/auth/oidc"
	// oidcCookieTTL matches the engine's time for a sign-in at the
	// provider.
	oidcCookieTTL = 10 * time.Minute
)

// oidcStart serves GET /api/auth/oidc/start.
func (g *Gateway) oidcStart(w http.ResponseWriter, r *http.Request) {
	if g.accounts == nil {
		writeError(w, codes.Unimplemented, "this gateway has no engine to sign users in with")
		return
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	binding := base64.RawURLEncoding.EncodeToString(raw[:])
	resp, err := g.accounts.BeginOIDCSignIn(withCredential(r.Context(), ""), &penguinv1.BeginOIDCSignInRequest{BrowserBinding: binding})
	if err != nil {
		g.signInFailed(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: binding, Path: oidcCookiePath, MaxAge: int(oidcCookieTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, resp.GetAuthorizationUrl(), http.StatusSeeOther)
}

// oidcCallback serves GET /api/auth/oidc/callback.
func (g *Gateway) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if g.accounts == nil {
		writeError(w, codes.Unimplemented, "this gateway has no engine to sign users in with")
		return
	}
	q := r.URL.Query()
	binding := ""
	if c, err := r.Cookie(oidcCookie); err == nil {
		binding = c.Value
	}
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: "", Path: oidcCookiePath, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
	if e := q.Get("error"); e != "" {
		msg := "the identity provider refused the sign-in: " + e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		g.signInFailed(w, r, status.Error(codes.Unauthenticated, msg))
		return
	}
	resp, err := g.accounts.CompleteOIDCSignIn(withCredential(r.Context(), ""), &penguinv1.CompleteOIDCSignInRequest{
		State: q.Get("state"), Code: q.Get("code"), BrowserBinding: binding,
	})
	if err != nil {
		g.signInFailed(w, r, err)
		return
	}
	if to := resp.GetRedirectUrl(); to != "" {
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	g.setSessionCookie(w, r, resp.GetSessionToken(), resp.GetExpiresAt().AsTime())
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signInFailed sends the browser back to the web app's sign-in page with
// the reason.
func (g *Gateway) signInFailed(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	g.opts.Logger.Info("sign-in with the identity provider refused", "code", codeName(st.Code()), "reason", st.Message())
	http.Redirect(w, r, "/?signin_error="+url.QueryEscape(st.Message()), http.StatusSeeOther)
}
