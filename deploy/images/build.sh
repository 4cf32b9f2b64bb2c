#!/usr/bin/env bash
# Builds Penguin's container images with no registry and no container
# daemon, and saves each as a docker archive under $OUT (bin/images):
#
#   penguin.tar              localhost/penguin:$TAG: the static penguin
#                            binary FROM scratch, with the CA bundle for the
#                            providers' HTTPS APIs (llm, engine, mockllm).
#   penguin-environment.tar  localhost/penguin-environment:$TAG: a Debian
#                            userland (environment.packages) for agents'
#                            commands, plus the penguin binary.
#   penguin-postgres.tar     localhost/penguin-postgres:$TAG: Debian's
#                            PostgreSQL for the dev overlay.
#
# The Debian root filesystems come from debootstrap against the package
# mirror this machine's apt already uses, and are cached in $IMAGE_CACHE,
# keyed by their package lists and by the function that builds them, so
# only the first build pays for them (about three minutes); later builds
# only add the freshly built binary. Load an archive with
# `ctr -n k8s.io images import`, `podman load` or `docker load`, or push it
# with `skopeo copy docker-archive:bin/images/penguin.tar docker://…`.
#
# Needs root (debootstrap, podman's storage), debootstrap, podman and zstd.
set -euo pipefail

cd "$(dirname "$0")/../.."
HERE=deploy/images
OUT=${OUT:-bin/images}
IMAGE_CACHE=${IMAGE_CACHE:-$OUT/cache}
TAG=${TAG:-dev}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
UID_GID=65532:65532

log() { printf '[images %3ds] %s\n' "$SECONDS" "$*" >&2; }
die() { echo "images: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and podman's storage need it)"
for c in debootstrap podman zstd go; do
	command -v "$c" >/dev/null || die "$c is missing (apt-get install debootstrap podman zstd)"
done
mkdir -p "$OUT" "$IMAGE_CACHE"
W=$(mktemp -d /tmp/penguin-images.XXXXXX)
trap 'rm -rf "$W"' EXIT
PODMAN=(podman --root "$W/storage" --runroot "$W/run" --storage-driver vfs
	--cgroup-manager cgroupfs --events-backend file)

# The Debian release and the mirror are the ones this machine's apt uses,
# so the images build wherever apt-get works, and no host is written here.
CODENAME=${DEBIAN_CODENAME:-$(. /etc/os-release && echo "$VERSION_CODENAME")}
ARCH=$(dpkg --print-architecture)
debian_mirror() {
	local m=""
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
		m=$(awk -v c="$CODENAME" '$1 == "deb" && $3 == c {print $2; exit}' /etc/apt/sources.list)
	fi
	[ -n "$m" ] || die "no Debian mirror found in /etc/apt (set DEBIAN_MIRROR)"
	echo "${DEBIAN_MIRROR:-$m}"
}

# build_rootfs NAME LIST DIR: a minimal Debian with the packages in LIST,
# the user 65532 ("penguin", home /home/penguin) and a /workspaces it owns;
# apt's lists and caches, documentation and translations are dropped, and
# so is PostgreSQL's JIT (LLVM, 130 MB; the dev server runs with jit=off).
build_rootfs() {
	local name=$1 list=$2 dir=$3 pkgs
	pkgs=$(grep -v -e '^#' -e '^[[:space:]]*$' "$list" | paste -sd, -)
	log "debootstrap $name ($CODENAME, $pkgs)"
	mkdir -p "$IMAGE_CACHE/debs"
	debootstrap --variant=minbase --arch="$ARCH" --include="$pkgs" --cache-dir="$(realpath "$IMAGE_CACHE/debs")" \
		"$CODENAME" "$dir" "$(debian_mirror)" >"$W/$name-debootstrap.log" 2>&1 ||
		{ tail -20 "$W/$name-debootstrap.log" >&2; die "debootstrap $name failed"; }
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* \
		"$dir"/usr/share/locale/* "$dir"/usr/share/i18n "$dir"/var/log/* "$dir"/tmp/* \
		"$dir"/usr/lib/postgresql/*/lib/llvmjit* "$dir"/usr/lib/postgresql/*/lib/bitcode \
		"$dir"/usr/lib/*-linux-gnu/libLLVM-* "$dir"/usr/lib/*-linux-gnu/libz3.so*
	echo "penguin:x:65532:65532:penguin:/home/penguin:/bin/bash" >>"$dir/etc/passwd"
	echo "penguin:x:65532:" >>"$dir/etc/group"
	install -d -o 65532 -g 65532 -m 0755 "$dir/home/penguin" "$dir/workspaces"
}

# rootfs NAME LIST: the path of the cached root filesystem archive of NAME,
# built first when the cache does not have it.
rootfs() {
	local name=$1 list=$2 key tar
	key=$( (declare -f build_rootfs; cat "$list"; echo "$CODENAME $ARCH") | sha256sum | cut -c1-16)
	tar=$IMAGE_CACHE/$name-rootfs-$CODENAME-$ARCH-$key.tar.zst
	if [ ! -f "$tar" ]; then
		build_rootfs "$name" "$list" "$W/$name-rootfs"
		tar -C "$W/$name-rootfs" --numeric-owner -cf - . | zstd -q -3 -T0 -o "$tar.tmp"
		mv "$tar.tmp" "$tar"
		rm -rf "$W/$name-rootfs"
		log "cached $tar ($(du -h "$tar" | cut -f1))"
	else
		log "rootfs $name from the cache: $tar"
	fi
	echo "$tar"
}

# import_rootfs NAME LIST: imports NAME's root filesystem as the image
# localhost/NAME-base:latest-build.
import_rootfs() {
	local tar
	tar=$(rootfs "$1" "$2")
	zstd -dc "$tar" | "${PODMAN[@]}" import -q - "localhost/$1-base:build" >/dev/null
}

# save IMAGE FILE: writes IMAGE as a docker archive (the format every
# loader reads) to $OUT/FILE.
save() {
	rm -f "$OUT/$2"
	"${PODMAN[@]}" save -q --format docker-archive -o "$OUT/$2" "$1"
	log "$1 -> $OUT/$2 ($(du -h "$OUT/$2" | cut -f1))"
}

log "go build penguin (static, $VERSION)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$W/ctx/penguin" ./cmd/penguin
# The sandbox's trampoline, beside penguin in the environment image: each
# environment's init starts through it (penguin sandbox-exec would start
# several times slower).
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$W/ctx/penguin-sandbox" ./cmd/penguin-sandbox
cp /etc/ssl/certs/ca-certificates.crt "$W/ctx/ca-certificates.crt"
cp "$HERE/postgres/entrypoint.sh" "$W/ctx/postgres-entrypoint.sh"
printf 'root:x:0:0:root:/:/sbin/nologin\npenguin:x:65532:65532:penguin:/home/penguin:/sbin/nologin\n' >"$W/ctx/passwd"
printf 'root:x:0:\npenguin:x:65532:\n' >"$W/ctx/group"

cat >"$W/Containerfile.penguin" <<EOF
FROM scratch
COPY passwd group /etc/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY penguin /usr/local/bin/penguin
USER $UID_GID
ENTRYPOINT ["/usr/local/bin/penguin"]
EOF
"${PODMAN[@]}" build -q -f "$W/Containerfile.penguin" -t "localhost/penguin:$TAG" "$W/ctx" >/dev/null
save "localhost/penguin:$TAG" penguin.tar

import_rootfs penguin-environment "$HERE/environment.packages"
cat >"$W/Containerfile.environment" <<EOF
FROM localhost/penguin-environment-base:build
COPY penguin penguin-sandbox /usr/local/bin/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/penguin SHELL=/bin/bash LANG=C.UTF-8
USER $UID_GID
WORKDIR /workspaces
ENTRYPOINT ["/usr/local/bin/penguin"]
EOF
"${PODMAN[@]}" build -q -f "$W/Containerfile.environment" -t "localhost/penguin-environment:$TAG" "$W/ctx" >/dev/null
save "localhost/penguin-environment:$TAG" penguin-environment.tar

import_rootfs penguin-postgres "$HERE/postgres.packages"
cat >"$W/Containerfile.postgres" <<EOF
FROM localhost/penguin-postgres-base:build
COPY postgres-entrypoint.sh /usr/local/bin/penguin-postgres
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
USER $UID_GID
ENTRYPOINT ["/usr/local/bin/penguin-postgres"]
EOF
"${PODMAN[@]}" build -q -f "$W/Containerfile.postgres" -t "localhost/penguin-postgres:$TAG" "$W/ctx" >/dev/null
save "localhost/penguin-postgres:$TAG" penguin-postgres.tar
log "done"
