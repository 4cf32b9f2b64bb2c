// Package egress is the HTTP client with which the environment service
// itself fetches URLs on a model's behalf (read_image with an http(s)
// source). Those requests leave from the service's process, not from a
// sandboxed command, so without care they would reach what the commands
// cannot: the service's own loopback ports, the cluster's private network,
// a cloud metadata endpoint (server-side request forgery).
//
// The client obeys the environment's network setting: in an environment
// without network every fetch is refused before any connection is tried.
// Otherwise each connection is checked at the moment it is dialed, after
// name resolution and for every redirect, by a net.Dialer Control hook
// that sees the very address the socket connects to (so a name that
// resolves to an internal address, or re-resolves to one later, is caught
// too). Loopback, private, link-local (cloud metadata included), shared
// (carrier-grade NAT), unspecified, multicast and reserved addresses are
// refused unless configuration allows their prefix. Proxies from the
// environment are not used: a proxy would make the request on the
// client's behalf, out of reach of the check.
//
// It is written here rather than taken from a library because it is a
// small Control function over the standard library's net/netip, and the
// libraries for it (ssrf filters) are not among the modules this project
// can fetch.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 5
)

// ErrRefused is wrapped by every refusal of a destination.
var ErrRefused = errors.New("refused")

// Options configure a client.
type Options struct {
	// NoNetwork refuses every fetch: the environment has no network.
	NoNetwork bool
	// Allow lists internal prefixes that may be reached all the same
	// (an intranet image server, a test server on loopback).
	Allow []netip.Prefix
	// Timeout bounds one fetch, redirects and body included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxRedirects bounds the redirects followed; zero means
	// DefaultMaxRedirects.
	MaxRedirects int
}

// special are the prefixes that are not public destinations beyond what
// netip's own predicates report.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a reserved \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a protocol-assignment address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
}

// Classify says why addr is not a public destination, or "" when it is.
func Classify(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return "an invalid address"
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsUnspecified():
		return "an unspecified address"
	case addr.IsLinkLocalUnicast():
		return "a link-local address (where cloud metadata services answer)"
	case addr.IsPrivate():
		return "a private address"
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, s := range special {
		if s.prefix.Contains(addr) {
			return s.what
		}
	}
	if !addr.IsGlobalUnicast() {
		return "not a global unicast address"
	}
	return ""
}

// NewClient returns the client for one environment.
func NewClient(o Options) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: o.control}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			if o.NoNetwork {
				return nil, fmt.Errorf("%w: this environment has no network access (no_network)", ErrRefused)
			}
			return dialer.DialContext(ctx, network, address)
		},
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  20 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           4,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > o.MaxRedirects {
				return fmt.Errorf("%w: more than %d redirects", ErrRefused, o.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: a redirect to a %q URL", ErrRefused, req.URL.Scheme)
			}
			return nil
		},
	}
}

// control checks the address a socket is about to connect to.
func (o Options) control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %s", ErrRefused, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrRefused, address, err)
	}
	addr := ap.Addr().Unmap()
	why := Classify(addr)
	if why == "" {
		return nil
	}
	for _, p := range o.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is %s, which the environment's tools may not reach; the service's configuration can allow its prefix", ErrRefused, addr, why)
}
