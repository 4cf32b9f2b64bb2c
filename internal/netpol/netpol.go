// Package netpol decides whether a set of Kubernetes NetworkPolicies lets
// a connection through, following the semantics of the
// networking.k8s.io/v1 API: a pod that no policy selects for a direction
// is open in that direction; a selected pod is open only to what some rule
// of a selecting policy allows; a connection between two pods needs both
// the sender's egress and the receiver's ingress.
//
// Penguin's tests use it to check the intent of the shipped policies
// (deploy/) on rendered manifests, and on the live objects of a test
// cluster whose network plugin does not enforce policies. It is written
// here because the enforcing implementations are network plugins, not
// libraries, and the part of the specification the tests need is short.
// Named ports are not supported (the shipped policies use numbers): a rule
// that names a port matches nothing, which errs on the side of "denied".
package netpol

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Peer is one end of a connection: a pod (Labels not nil) in Namespace,
// whose namespace carries NamespaceLabels, or an address outside the
// cluster's pods (Labels nil). IP is the address the connection uses at
// this end; for a pod, it is the pod's IP.
type Peer struct {
	Namespace       string
	NamespaceLabels map[string]string
	Labels          map[string]string
	IP              netip.Addr
}

// IsPod reports whether p is a pod, whose policies apply.
func (p Peer) IsPod() bool { return p.Labels != nil }

// Flow is a connection from From to To's Port. Protocol defaults to TCP.
type Flow struct {
	From, To Peer
	Port     int32
	Protocol corev1.Protocol
}

// Allowed reports whether policies let f through: the egress side for a
// pod sender and the ingress side for a pod receiver.
func Allowed(policies []networkingv1.NetworkPolicy, f Flow) bool {
	if f.Protocol == "" {
		f.Protocol = corev1.ProtocolTCP
	}
	if f.From.IsPod() && !open(policies, f.From, networkingv1.PolicyTypeEgress, func(p *networkingv1.NetworkPolicy) bool {
		for _, r := range p.Spec.Egress {
			if portsMatch(r.Ports, f) && peersMatch(r.To, p.Namespace, f.To) {
				return true
			}
		}
		return false
	}) {
		return false
	}
	if f.To.IsPod() && !open(policies, f.To, networkingv1.PolicyTypeIngress, func(p *networkingv1.NetworkPolicy) bool {
		for _, r := range p.Spec.Ingress {
			if portsMatch(r.Ports, f) && peersMatch(r.From, p.Namespace, f.From) {
				return true
			}
		}
		return false
	}) {
		return false
	}
	return true
}

// open reports whether pod is open in direction dir: no policy of its
// namespace selects it for dir, or one that does has a rule (allows)
// that lets the flow through.
func open(policies []networkingv1.NetworkPolicy, pod Peer, dir networkingv1.PolicyType, allows func(*networkingv1.NetworkPolicy) bool) bool {
	selected := false
	for i := range policies {
		p := &policies[i]
		if p.Namespace != pod.Namespace || !hasType(p, dir) || !selects(&p.Spec.PodSelector, pod.Labels) {
			continue
		}
		selected = true
		if allows(p) {
			return true
		}
	}
	return !selected
}

// hasType applies the API's defaults: a policy without policyTypes is an
// ingress policy, and an egress one too when it has egress rules.
func hasType(p *networkingv1.NetworkPolicy, dir networkingv1.PolicyType) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		if t == dir {
			return true
		}
	}
	return false
}

// selects reports whether the selector matches set; an invalid selector
// matches nothing.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}

// portsMatch reports whether a rule's ports take f: no ports means every
// port; a port without a number means every port of its protocol.
func portsMatch(ports []networkingv1.NetworkPolicyPort, f Flow) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != f.Protocol {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type != 0 { // a named port: see the package doc
			continue
		}
		lo, hi := p.Port.IntVal, p.Port.IntVal
		if p.EndPort != nil {
			hi = *p.EndPort
		}
		if f.Port >= lo && f.Port <= hi {
			return true
		}
	}
	return false
}

// peersMatch reports whether one of a rule's peers (from or to, in a
// policy of namespace ns) is other; no peers means everyone.
func peersMatch(peers []networkingv1.NetworkPolicyPeer, ns string, other Peer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			if inBlock(p.IPBlock, other.IP) {
				return true
			}
		case !other.IsPod():
			// Pod and namespace selectors name pods only.
		case p.NamespaceSelector == nil:
			if other.Namespace == ns && selects(p.PodSelector, other.Labels) {
				return true
			}
		default:
			podOK := p.PodSelector == nil || selects(p.PodSelector, other.Labels)
			if podOK && selects(p.NamespaceSelector, other.NamespaceLabels) {
				return true
			}
		}
	}
	return false
}

// inBlock reports whether ip lies in the block's CIDR and in none of its
// excepts.
func inBlock(b *networkingv1.IPBlock, ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !cidr.Contains(ip) {
		return false
	}
	for _, e := range b.Except {
		if ex, err := netip.ParsePrefix(e); err != nil || ex.Contains(ip) {
			return false
		}
	}
	return true
}
