package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/browser"
	"github.com/penguin-agent/penguin/internal/credentials"
	"github.com/penguin-agent/penguin/internal/grpcclient"
)

// oidcLoginWait bounds how long `penguin login --oidc` waits for the
// browser: the engine forgets a sign-in after ten minutes.
const oidcLoginWait = 10 * time.Minute

// signInOIDC signs in to engine through its identity provider, as native
// apps do (RFC 8252; docs/decisions.md, "penguin login through the
// identity provider"): it listens on a random port of 127.0.0.1, starts
// the sign-in with that address and a secret of its own, and sends the
// person to the authorization URL (opening a browser unless openBrowser
// is false; the URL is printed either way). The provider brings the
// browser back to the server's callback, which sends it on to this
// listener with the state and the code; this client then completes the
// sign-in with its secret, so the login session's secret comes to it
// alone. A request to the listener with another state is answered with
// an error and ignored.
func signInOIDC(ctx context.Context, engine string, openBrowser bool, say io.Writer) (credentials.Entry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return credentials.Entry{}, fmt.Errorf("listen on loopback for the identity provider's answer: %w", err)
	}
	defer ln.Close()
	loopback := "http://" + ln.Addr().String() + "/callback"
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	binding := base64.RawURLEncoding.EncodeToString(raw[:])

	conn, err := grpcclient.New(engine, grpcclient.Options{})
	if err != nil {
		return credentials.Entry{}, err
	}
	defer conn.Close()
	auth := penguinv1.NewAuthServiceClient(conn)
	begun, err := auth.BeginOIDCSignIn(ctx, &penguinv1.BeginOIDCSignInRequest{BrowserBinding: binding, LoopbackRedirect: loopback})
	if err != nil {
		return credentials.Entry{}, statusError(err)
	}
	authURL, err := url.Parse(begun.GetAuthorizationUrl())
	if err != nil || authURL.Query().Get("state") == "" {
		return credentials.Entry{}, fmt.Errorf("the server's authorization URL %q has no state", begun.GetAuthorizationUrl())
	}
	state := authURL.Query().Get("state")

	type result struct {
		entry credentials.Entry
		err   error
	}
	done := make(chan result, 1)
	finished := false
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			// Not this sign-in's answer (a stale tab, or a page that
			// guessed the port): it completes nothing.
			fmt.Fprintln(say, "Ignored an answer for another sign-in (state mismatch) at the loopback address.")
			loginPage(w, http.StatusBadRequest, "This is not the answer to the sign-in penguin login is waiting for (state mismatch).")
			return
		}
		if finished {
			loginPage(w, http.StatusConflict, "This sign-in is over; see the terminal.")
			return
		}
		finished = true
		var res result
		if e := q.Get("error"); e != "" {
			res.err = fmt.Errorf("the identity provider refused the sign-in: %s %s", e, q.Get("error_description"))
		} else {
			resp, err := auth.CompleteOIDCSignIn(r.Context(), &penguinv1.CompleteOIDCSignInRequest{
				State: state, Code: q.Get("code"), BrowserBinding: binding, LoopbackRedirect: loopback,
			})
			if err != nil {
				res.err = statusError(err)
			} else {
				res.entry = credentials.Entry{Secret: resp.GetSessionToken(), User: resp.GetUser().GetUserId(), ExpiresAt: resp.GetExpiresAt().AsTime()}
			}
		}
		if res.err != nil {
			loginPage(w, http.StatusForbidden, "Sign-in failed: "+res.err.Error())
		} else {
			loginPage(w, http.StatusOK, "Signed in to "+engine+" as "+res.entry.User+". You may close this tab.")
		}
		done <- res
	})
	// One request at a time: the state check and the one completion
	// need no lock then.
	srv := &http.Server{Handler: serialized(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	fmt.Fprintf(say, "To sign in, open this URL in a browser on this machine:\n\n  %s\n\n", authURL)
	if openBrowser {
		if err := browser.Open(authURL.String()); err != nil {
			fmt.Fprintf(say, "(%v; open it yourself)\n", err)
		}
	}
	fmt.Fprintln(say, "Waiting for the sign-in to finish...")
	wait, cancel := context.WithTimeout(ctx, oidcLoginWait)
	defer cancel()
	select {
	case res := <-done:
		return res.entry, res.err
	case <-wait.Done():
		if errors.Is(wait.Err(), context.DeadlineExceeded) {
			return credentials.Entry{}, fmt.Errorf("the sign-in did not finish within %v; run penguin login --oidc again", oidcLoginWait)
		}
		return credentials.Entry{}, wait.Err()
	}
}

// serialized runs h's requests one at a time.
func serialized(h http.Handler) http.Handler {
	one := make(chan struct{}, 1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case one <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-one }()
		h.ServeHTTP(w, r)
	})
}

// loginPage answers the browser with a short page saying msg.
func loginPage(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!doctype html><title>penguin login</title><p>%s</p>\n", html.EscapeString(msg))
}
