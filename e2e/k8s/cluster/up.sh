#!/bin/bash
# Brings the single-node cluster up (binaries in $BIN: k8s-bin.sh), with the
# suite's images loaded and cluster DNS running.
set -euo pipefail
R=$(cd "$(dirname "$0")" && pwd); source "$R/env.sh"
t0=$(date +%s)
[ -f "$PKI/ca.crt" ] || "$R/gen-certs.sh" >/dev/null
"$R/ns-up.sh"
"$R/containerd-up.sh"
"$R/images.sh"
"$R/cp-up.sh"
"$R/kubelet-up.sh"
"$R/kube-proxy-up.sh"
# The default ServiceAccount must exist before pods can be created.
for _ in $(seq 60); do "$R/kc" get sa default -n default >/dev/null 2>&1 && break; sleep 1; done
"$R/kc" apply -f "$R/coredns.yaml" >/dev/null
"$R/kc" -n kube-system rollout status deploy/coredns --timeout=120s
echo "cluster up in $(($(date +%s) - t0)) s"
