#!/bin/bash
# Puts the test cluster's binaries in $BIN: the six Kubernetes components,
# built from the wrapper module k8s-build/ (build-k8s.sh), and CoreDNS,
# built from coredns-build/. A build is cached as one archive in
# $K8S_BIN_CACHE_DIR, keyed by the Kubernetes version and a hash of
# everything the build depends on, and restored from there when present
# (about 5 s); a cold build takes 7 to 10 minutes on two cores.
set -euo pipefail
R=$(cd "$(dirname "$0")" && pwd); source "$R/env.sh"
CACHE_DIR=${K8S_BIN_CACHE_DIR:-/var/cache/penguin-ci}
K8S_CMDS=(kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy)
KV=$(awk '/^require k8s.io\/kubernetes/{print $3}' "$R/k8s-build/go.mod")
key=$(cat "$R/build-k8s.sh" "$R/k8s-build/go.mod" "$R/k8s-build/go.sum" "$R"/coredns-build/* | sha256sum | cut -c1-12)
archive=$CACHE_DIR/k8s-bin-$KV-$key.tar.zst

complete() { for c in "${K8S_CMDS[@]}" coredns; do [ -x "$BIN/$c" ] || return 1; done; }

mkdir -p "$BIN" "$CACHE_DIR"
if ! complete && [ -f "$archive" ]; then
	zstd -dc "$archive" | tar -C "$BIN" -xf -
	echo "k8s binaries restored from $archive"
fi
if ! complete; then
	echo "building the Kubernetes $KV binaries and CoreDNS (a cold build takes 7-10 min)"
	"$R/build-k8s.sh" "$BIN" "${K8S_CMDS[@]}" >/dev/null
	(cd "$R/coredns-build" && CGO_ENABLED=0 GOFLAGS="-mod=mod -p=2" go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .)
fi
complete || { echo "k8s-bin: binaries still missing in $BIN" >&2; exit 1; }
if [ ! -f "$archive" ]; then
	tar -C "$BIN" -cf - "${K8S_CMDS[@]}" coredns | zstd -q -3 -T0 -o "$archive.tmp"
	mv "$archive.tmp" "$archive"
	echo "cached the binaries in $archive ($(du -h "$archive" | cut -f1))"
fi
