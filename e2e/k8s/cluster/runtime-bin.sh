#!/bin/bash
# Puts the node's container runtime in $RBIN: containerd 2, its runc shim
# and ctr, built from the wrapper module runtime-build/, runc, built from
# its own module at RV below (Debian's containerd 1.6 and runc 1.1
# cannot start pods with hostUsers: false), and runc-userns, the runc that
# containerd calls (runc-userns/). Cached as one archive in
# $K8S_BIN_CACHE_DIR, keyed by a hash of everything the build depends on,
# like the Kubernetes binaries (k8s-bin.sh), and built whenever the archive
# of that key is missing; a cold build takes about 4 minutes on two cores.
set -euo pipefail
R=$(cd "$(dirname "$0")" && pwd); source "$R/env.sh"
CACHE_DIR=${K8S_BIN_CACHE_DIR:-/var/cache/penguin-ci}
CMDS=(containerd containerd-shim-runc-v2 ctr runc runc-userns)
ver() { awk -v m="$1" '{for (i = 1; i < NF; i++) if ($i == m) {print $(i + 1); exit}}' "$R/runtime-build/go.mod"; }
# runc: 1.2 or later mounts idmapped volumes for user-namespaced pods.
CV=$(ver github.com/containerd/containerd/v2) RV=v1.3.7
key=$(cat "$R/runtime-bin.sh" "$R"/runtime-build/* "$R"/runc-userns/go.mod "$R"/runc-userns/main.go | sha256sum | cut -c1-12)
archive=$CACHE_DIR/runtime-bin-$CV-$RV-$key.tar.zst

mkdir -p "$RBIN" "$CACHE_DIR"
if [ -f "$archive" ]; then
	zstd -dc "$archive" | tar -C "$RBIN" -xf -
	echo "container runtime restored from $archive"
else
	echo "building containerd $CV and runc $RV"
	(cd "$R/runtime-build" && CGO_ENABLED=0 GOFLAGS="-mod=mod -p=2" go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CV" -o "$RBIN/" \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		github.com/containerd/containerd/v2/cmd/ctr)
	# runc needs cgo (its nsenter) and libseccomp (Debian's libseccomp-dev).
	CGO_ENABLED=1 GOBIN=$RBIN GOFLAGS=-p=2 go install -trimpath -tags seccomp \
		-ldflags "-s -w -X main.version=${RV#v}" "github.com/opencontainers/runc@$RV"
	(cd "$R/runc-userns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$RBIN/runc-userns" .)
	tar -C "$RBIN" -cf - "${CMDS[@]}" | zstd -q -3 -T0 -o "$archive.tmp"
	mv "$archive.tmp" "$archive"
	echo "cached the container runtime in $archive ($(du -h "$archive" | cut -f1))"
fi
for c in "${CMDS[@]}"; do [ -x "$RBIN/$c" ] || { echo "runtime-bin: $c is missing in $RBIN" >&2; exit 1; }; done
