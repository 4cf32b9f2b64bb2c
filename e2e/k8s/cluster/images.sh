#!/bin/bash
# Loads every image the suite runs into the node's containerd (namespace
# k8s.io), with no registry: the pause image, CoreDNS and the test identity
# provider (internal/testkit/oidcop, which no product image carries), built
# here FROM scratch, and Penguin's images from bin/images (`make images`).
set -euo pipefail
R=$(cd "$(dirname "$0")" && pwd); source "$R/env.sh"
REPO=$(cd "$R/../../.." && pwd)
W=$H/imgbuild; rm -rf "$W"; mkdir -p "$W/pause" "$W/coredns" "$W/penguin-oidcop"
PODMAN=(podman --root "$H/podman/root" --runroot "$H/podman/run" --storage-driver vfs --cgroup-manager cgroupfs --events-backend file)

(cd "$R/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$W/pause/pause" .)
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$W/pause/Containerfile"
cp "$BIN/coredns" "$W/coredns/coredns"
printf 'FROM scratch\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n' >"$W/coredns/Containerfile"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$W/penguin-oidcop/oidcop" ./internal/testkit/oidcop/cmd/oidcop)
printf 'FROM scratch\nCOPY oidcop /oidcop\nUSER 65532:65532\nENTRYPOINT ["/oidcop"]\n' >"$W/penguin-oidcop/Containerfile"
for img in pause coredns penguin-oidcop; do
	"${PODMAN[@]}" build -q -t "localhost/$img:local" "$W/$img" >/dev/null
	"${PODMAN[@]}" save -q --format docker-archive -o "$W/$img.tar" "localhost/$img:local"
done
for f in "$W/pause.tar" "$W/coredns.tar" "$W/penguin-oidcop.tar" "$REPO"/bin/images/*.tar; do
	[ -f "$f" ] || { echo "images: $f is missing (run make images)" >&2; exit 1; }
	inns ctr -a "$CTR_SOCK" -n k8s.io images import "$f" >/dev/null
done
inns ctr -a "$CTR_SOCK" -n k8s.io images ls -q | grep -v '^sha256:'
