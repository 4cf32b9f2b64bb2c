// Command coredns is CoreDNS with only the plugins the test cluster's
// Corefile uses (cluster names from the Kubernetes API, health and
// readiness endpoints, a cache and error logs), so it builds in a fraction
// of the time the full distribution takes. The test cluster has no other
// source of Service names, and the engine finds environment and llm pods
// through the headless Services' DNS records.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
