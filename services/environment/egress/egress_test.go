package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	internal := []string{
		"127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "10.1.2.3", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "fe80::1", "fd00:ec2::254", "100.100.100.200", "224.0.0.1", "ff02::1",
		"255.255.255.255", "240.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::1", "198.18.0.1", "192.0.0.170",
	}
	for _, s := range internal {
		if why := Classify(netip.MustParseAddr(s)); why == "" {
			t.Errorf("%s passes as public", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "172.32.0.1", "100.128.0.1"} {
		if why := Classify(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s refused as %s", s, why)
		}
	}
}

// serve starts an HTTP server on addr (host:0) answering with h.
func serve(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = lis
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func get(c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func TestClientRefusesInternalDestinations(t *testing.T) {
	var hits int
	target := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	other := serve(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	redirect := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/x", http.StatusFound)
	}))
	_, port, _ := net.SplitHostPort(target[len("http://"):])

	// Refused by default, by address and by a name that resolves to it.
	for _, u := range []string{target, "http://localhost:" + port} {
		if err := get(NewClient(Options{}), u); !errors.Is(err, ErrRefused) {
			t.Fatalf("GET %s = %v; want refused", u, err)
		}
	}
	// Refused without network, even where allowed.
	allowed := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	if err := get(NewClient(Options{NoNetwork: true, Allow: allowed}), target); !errors.Is(err, ErrRefused) {
		t.Fatalf("GET without network = %v", err)
	}
	if hits != 0 {
		t.Fatalf("a refused request reached a server %d times", hits)
	}
	// Allowed by configuration.
	if err := get(NewClient(Options{Allow: allowed}), target); err != nil || hits != 1 {
		t.Fatalf("GET of an allowed prefix = %v (hits %d)", err, hits)
	}
	// A redirect from an allowed server to one that is not is refused
	// when it is dialed.
	if err := get(NewClient(Options{Allow: allowed}), redirect); !errors.Is(err, ErrRefused) || hits != 1 {
		t.Fatalf("GET through a redirect = %v (hits %d)", err, hits)
	}
}
