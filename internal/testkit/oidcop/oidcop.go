// Package oidcop runs a real OpenID Provider on loopback for tests: the
// op package of github.com/zitadel/oidc/v3 over its example in-memory
// storage, with real discovery, JWKS, authorization code flow with PKCE,
// token and userinfo endpoints.
//
// In front of it sits a small HTTP front of this package, which is the
// issuer the client sees. It passes everything through and adds what a
// test of the client's checks needs and the provider cannot be asked to
// produce:
//
//   - a login page that signs in whichever user the test chose
//     ([Provider.SignInAs]), so that a plain HTTP client (or a browser)
//     goes through the flow without a form;
//   - [Provider.Tamper], which rewrites the claims of the next ID token the
//     token endpoint returns and signs it again, with a key the front
//     publishes beside the provider's in the JWKS ([Trusted]), or with one
//     it does not publish ([Stranger]): a wrong audience, an expired
//     token, another nonce, a token signed by another key.
package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is an account at the provider.
type User struct {
	// ID is the provider's subject ("sub").
	ID            string
	Username      string
	Email         string
	EmailVerified bool
	// Groups go in the "groups" claim of the userinfo answer.
	Groups []string
}

// Key says which key signs a tampered ID token.
type Key int

const (
	// Trusted is a key the provider's JWKS (as the front serves it)
	// publishes: a token it signs passes the signature check.
	Trusted Key = iota
	// Stranger is a key published nowhere.
	Stranger
)

// Provider is a running OpenID Provider. Create it with [Start].
type Provider struct {
	// Issuer is the provider's issuer URL.
	Issuer string

	st      *userinfoStorage
	users   userStore
	clients map[string]*storage.Client
	op      *op.Provider
	trusted *rsa.PrivateKey
	strange *rsa.PrivateKey

	mu     sync.Mutex
	next   string
	tamper func(claims map[string]any) Key
}

// Start runs a provider with the given users on loopback until the test
// ends.
func Start(t testing.TB, users ...User) *Provider {
	t.Helper()
	p, stop, err := Run("127.0.0.1:0", "", users...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return p
}

// Run runs a provider with the given users at addr until stop is called:
// for a test of another process (the web app's browser test runs it
// through cmd/oidcop, the Kubernetes suite in a pod). Its issuer URL is
// issuer, or "http://" and the address it listens at when issuer is
// empty; a provider behind a name (a Kubernetes Service) gives the URL
// its clients reach it at, which the tokens it issues must name.
func Run(addr, issuer string, users ...User) (_ *Provider, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if issuer == "" {
		issuer = "http://" + ln.Addr().String()
	}
	p := &Provider{Issuer: issuer, clients: map[string]*storage.Client{}}
	us := userStore{users: map[string]*storage.User{}, groups: map[string][]string{}}
	for _, u := range users {
		us.users[u.ID] = &storage.User{
			ID: u.ID, Username: u.Username, Password: "password", FirstName: u.Username, LastName: "Test",
			Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: language.English,
		}
		us.groups[u.ID] = u.Groups
	}
	p.users = us
	p.st = &userinfoStorage{Storage: storage.NewStorageWithClients(us, p.clients), groups: us.groups}
	if p.trusted, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, nil, err
	}
	if p.strange, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, nil, err
	}
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte(p.Issuer)), CodeMethodS256: true, AuthMethodPost: true}
	if p.op, err = op.NewProvider(cfg, p.st, op.StaticIssuer(p.Issuer), op.WithAllowInsecure()); err != nil {
		_ = ln.Close()
		return nil, nil, err
	}
	srv := &http.Server{Handler: p.front(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return p, func() { _ = srv.Close() }, nil
}

// Client registers a confidential web client that may redirect to
// redirectURL, and returns its id and secret.
func (p *Provider) Client(redirectURL string) (id, secret string) {
	id, secret = "penguin-"+random(6), random(24)
	p.ClientWith(id, secret, redirectURL)
	return id, secret
}

// ClientWith registers a confidential web client with the given id and
// secret that may redirect to redirectURL.
func (p *Provider) ClientWith(id, secret, redirectURL string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[id] = storage.WebClient(id, secret, redirectURL)
}

// SignInAs makes the login page sign in the user with the given id from
// now on.
func (p *Provider) SignInAs(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = id
}

// SetGroups replaces the groups of the user with the given id.
func (p *Provider) SetGroups(id string, groups ...string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.groups[id] = groups
}

// Tamper makes the token endpoint rewrite the claims of the next ID token
// it returns with f and sign it again with the key f returns.
func (p *Provider) Tamper(f func(claims map[string]any) Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = f
}

const trustedKID, strangerKID = "oidcop-trusted", "oidcop-stranger"

// front is the HTTP handler in front of the provider.
func (p *Provider) front() http.Handler {
	mux := http.NewServeMux()
	// The example storage's clients send the browser to this login page.
	mux.HandleFunc("GET /login/username", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		id := p.next
		p.mu.Unlock()
		u := p.users.GetUserByID(id)
		if u == nil {
			http.Error(w, "the test chose no user to sign in", http.StatusBadRequest)
			return
		}
		reqID := r.URL.Query().Get("authRequestID")
		if err := p.st.CheckUsernamePassword(u.Username, u.Password, reqID); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, op.AuthCallbackURL(p.op)(r.Context(), reqID), http.StatusFound)
	})
	// Another process chooses who signs in next here.
	mux.HandleFunc("POST /oidcop/sign-in-as", func(w http.ResponseWriter, r *http.Request) {
		p.SignInAs(r.URL.Query().Get("sub"))
		w.WriteHeader(http.StatusNoContent)
	})
	target, _ := url.Parse("http://provider.invalid")
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		Transport:      handlerTransport{p.op},
		ModifyResponse: p.modify,
	}
	mux.Handle("/", proxy)
	return mux
}

// handlerTransport serves a request with a handler in process, so that
// the front and the provider share one listener.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// modify adds the front's trusted key to the JWKS and applies a pending
// tamper to the token endpoint's ID token.
func (p *Provider) modify(resp *http.Response) error {
	switch {
	case strings.HasSuffix(resp.Request.URL.Path, "/keys"):
		var set jose.JSONWebKeySet
		if err := readJSON(resp, &set); err != nil {
			return err
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &p.trusted.PublicKey, KeyID: trustedKID, Algorithm: string(jose.RS256), Use: "sig"})
		return writeJSON(resp, set)
	case strings.HasSuffix(resp.Request.URL.Path, "/oauth/token") && resp.StatusCode == http.StatusOK:
		p.mu.Lock()
		f := p.tamper
		p.tamper = nil
		p.mu.Unlock()
		if f == nil {
			return nil
		}
		var body map[string]any
		if err := readJSON(resp, &body); err != nil {
			return err
		}
		raw, _ := body["id_token"].(string)
		parts := strings.Split(raw, ".")
		if len(parts) != 3 {
			return fmt.Errorf("oidcop: the token endpoint sent no ID token to tamper with")
		}
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			return err
		}
		var claims map[string]any
		if err := json.Unmarshal(payload, &claims); err != nil {
			return err
		}
		key, kid := p.trusted, trustedKID
		if f(claims) == Stranger {
			key, kid = p.strange, strangerKID
		}
		if body["id_token"], err = sign(key, kid, claims); err != nil {
			return err
		}
		return writeJSON(resp, body)
	}
	return nil
}

func sign(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(b)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

func readJSON(resp *http.Response, v any) error {
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(resp *http.Response, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", fmt.Sprint(len(b)))
	return nil
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// userStore is the example storage's user store over the test's users.
type userStore struct {
	users  map[string]*storage.User
	groups map[string][]string
}

func (u userStore) GetUserByID(id string) *storage.User { return u.users[id] }

func (u userStore) GetUserByUsername(name string) *storage.User {
	for _, x := range u.users {
		if x.Username == name {
			return x
		}
	}
	return nil
}

func (u userStore) ExampleClientID() string { return storage.ServiceUserID }

// userinfoStorage is the example storage with the users' groups in the
// userinfo answer.
type userinfoStorage struct {
	*storage.Storage
	mu     sync.Mutex
	groups map[string][]string
}

// SetUserinfoFromToken implements op.Storage: the example's answer plus
// the "groups" claim.
func (s *userinfoStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[info.Subject]; g != nil {
		info.AppendClaims("groups", g)
	}
	return nil
}
