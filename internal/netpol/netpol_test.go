package netpol_test

import (
	"net/netip"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/penguin-agent/penguin/internal/netpol"
)

const policies = `
items:
- metadata: {name: deny, namespace: app}
  spec:
    podSelector: {}
    policyTypes: [Ingress, Egress]
- metadata: {name: web, namespace: app}
  spec:
    podSelector: {matchLabels: {role: web}}
    ingress:
    - ports: [{port: 80}]
    egress:
    - to: [{podSelector: {matchLabels: {role: db}}}]
      ports: [{port: 5432}]
    - to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.0.0.0/8]}}]
      ports: [{port: 443}]
    - to: [{namespaceSelector: {matchLabels: {name: dns}}, podSelector: {matchLabels: {role: dns}}}]
      ports: [{port: 53, protocol: UDP}]
- metadata: {name: db, namespace: app}
  spec:
    podSelector: {matchLabels: {role: db}}
    ingress:
    - from: [{podSelector: {matchLabels: {role: web}}}]
      ports: [{port: 5000, endPort: 6000}]
`

func pod(ns, role, ip string) netpol.Peer {
	return netpol.Peer{Namespace: ns, NamespaceLabels: map[string]string{"name": ns}, Labels: map[string]string{"role": role}, IP: netip.MustParseAddr(ip)}
}

func TestAllowed(t *testing.T) {
	var list struct {
		Items []networkingv1.NetworkPolicy `json:"items"`
	}
	if err := yaml.UnmarshalStrict([]byte(policies), &list); err != nil {
		t.Fatal(err)
	}
	web, db, other := pod("app", "web", "10.1.0.1"), pod("app", "db", "10.1.0.2"), pod("app", "other", "10.1.0.3")
	dns, wrongDNS := pod("dns", "dns", "10.2.0.1"), pod("elsewhere", "dns", "10.3.0.1")
	outside := netpol.Peer{IP: netip.MustParseAddr("203.0.113.7")}
	private := netpol.Peer{IP: netip.MustParseAddr("10.9.9.9")}
	unselected := pod("free", "web", "10.4.0.1")
	for _, tt := range []struct {
		name string
		f    netpol.Flow
		want bool
	}{
		{"outside to web:80", netpol.Flow{From: outside, To: web, Port: 80}, true},
		{"outside to web:81", netpol.Flow{From: outside, To: web, Port: 81}, false},
		{"web to db in its port range", netpol.Flow{From: web, To: db, Port: 5432}, true},
		{"web to db outside the egress port", netpol.Flow{From: web, To: db, Port: 5433}, false},
		{"other to db (default deny egress)", netpol.Flow{From: other, To: db, Port: 5432}, false},
		{"unselected namespace to db (db ingress)", netpol.Flow{From: unselected, To: db, Port: 5432}, false},
		{"web to the internet on 443", netpol.Flow{From: web, To: outside, Port: 443}, true},
		{"web to a private address on 443 (except)", netpol.Flow{From: web, To: private, Port: 443}, false},
		{"web to dns over UDP", netpol.Flow{From: web, To: dns, Port: 53, Protocol: "UDP"}, true},
		{"web to dns over TCP", netpol.Flow{From: web, To: dns, Port: 53}, false},
		{"web to a dns pod of another namespace", netpol.Flow{From: web, To: wrongDNS, Port: 53, Protocol: "UDP"}, false},
		{"a pod no policy selects talks freely", netpol.Flow{From: unselected, To: outside, Port: 1234}, true},
	} {
		if got := netpol.Allowed(list.Items, tt.f); got != tt.want {
			t.Errorf("%s: Allowed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
