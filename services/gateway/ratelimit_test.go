package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestClientKey(t *testing.T) {
	trusting := &Gateway{opts: Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}}
	for _, c := range []struct {
		g      *Gateway
		remote string
		xff    []string
		want   string
	}{
		{&Gateway{}, "192.0.2.7:5555", nil, "192.0.2.7"},
		{&Gateway{}, "[2001:db8:1:2:3:4:5:6]:5555", nil, "2001:db8:1:2::"},
		{&Gateway{}, "[::ffff:192.0.2.7]:5555", nil, "192.0.2.7"},
		// Nothing is trusted by default: a forged header changes nothing.
		{&Gateway{}, "192.0.2.7:5555", []string{"198.51.100.1"}, "192.0.2.7"},
		// An untrusted peer's header is not read, even with proxies set.
		{trusting, "192.0.2.7:5555", []string{"198.51.100.1"}, "192.0.2.7"},
		// A trusted proxy's: the nearest untrusted address, not what the
		// client wrote further left.
		{trusting, "10.1.2.3:5555", []string{"198.51.100.1"}, "198.51.100.1"},
		{trusting, "10.1.2.3:5555", []string{"203.0.113.9, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{trusting, "10.1.2.3:5555", []string{"203.0.113.9", "198.51.100.1:4711"}, "198.51.100.1"},
		{trusting, "[fd00::1]:5555", []string{"2001:db8:1:2::77"}, "2001:db8:1:2::"},
		// Only proxies, or nothing: the last proxy is the client.
		{trusting, "10.1.2.3:5555", []string{"10.4.4.4"}, "10.4.4.4"},
		{trusting, "10.1.2.3:5555", nil, "10.1.2.3"},
		// Garbage stops the walk at the last good address.
		{trusting, "10.1.2.3:5555", []string{"198.51.100.1, not-an-ip"}, "10.1.2.3"},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := c.g.clientKey(r); got != c.want {
			t.Errorf("clientKey(%s, X-Forwarded-For %q, trusted %v) = %q; want %q", c.remote, c.xff, c.g.opts.TrustedProxies, got, c.want)
		}
	}
}

// TestOIDCStartLimitBehindProxy floods GET /api/auth/oidc/start of a
// gateway on a real port that trusts the proxy at 127.0.0.2 alone: from
// 127.0.0.1, a new forged X-Forwarded-For on every request gains nothing
// (429 after the burst); from the proxy, requests forwarded for ever new
// clients are never refused, while one client behind it is.
func TestOIDCStartLimitBehindProxy(t *testing.T) {
	srv := httptest.NewServer(New(nil, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}))
	defer srv.Close()
	from := func(ip net.IP) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}}}
	}
	// flood sends n starts, the i-th forwarded for xff(i), and returns the
	// number of the first one refused, or 0.
	flood := func(c *http.Client, n int, xff func(int) string) int {
		t.Helper()
		for i := 1; i <= n; i++ {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/auth/oidc/start", nil)
			req.Header.Set("X-Forwarded-For", xff(i))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				return i
			}
		}
		return 0
	}
	forged := func(i int) string { return fmt.Sprintf("198.51.100.%d", i) }
	if n := flood(from(net.IPv4(127, 0, 0, 1)), 60, forged); n == 0 {
		t.Fatal("60 starts from one untrusted address with forged X-Forwarded-For were all let through")
	}
	proxy := from(net.IPv4(127, 0, 0, 2))
	if n := flood(proxy, 60, func(i int) string { return fmt.Sprintf("203.0.113.%d", i) }); n != 0 {
		t.Fatalf("start %d of 60 different clients behind the trusted proxy was refused", n)
	}
	if n := flood(proxy, 60, func(int) string { return "192.0.2.50" }); n == 0 {
		t.Fatal("60 starts of one client behind the trusted proxy were all let through")
	}
}
