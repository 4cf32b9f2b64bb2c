#!/usr/bin/env bash
# Checks the release archives (deploy/dist): two builds into two
# directories give the same bytes, SHA256SUMS matches them, and the Linux
# archives' penguin prints the stamped version, every archive holds the
# README and the LICENSE: amd64 natively, arm64
# through qemu-user when qemu-aarch64-static (Debian's qemu-user-static)
# is installed, else said and skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."

version="${VERSION:-check-$(git rev-parse --short HEAD 2>/dev/null || echo dev)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

go run ./deploy/dist -version "$version" -out "$work/a"
go run ./deploy/dist -version "$version" -out "$work/b"
diff -r "$work/a" "$work/b" || { echo "dist: the two builds differ" >&2; exit 1; }
(cd "$work/a" && sha256sum -c --quiet SHA256SUMS)
count="$(ls "$work/a" | grep -c -E '\.(tar\.gz|zip)$')"
[[ "$count" == 6 ]] || { echo "dist: $count archives, want 6" >&2; exit 1; }

for arch in amd64 arm64; do
	dir="penguin-$version-linux-$arch"
	mkdir -p "$work/x"
	tar -xzf "$work/a/$dir.tar.gz" -C "$work/x"
	for doc in README.md LICENSE; do
		cmp -s "$work/x/$dir/$doc" "$doc" || { echo "dist: linux-$arch archive lacks $doc or holds another one" >&2; exit 1; }
	done
	run=("$work/x/$dir/penguin" version)
	if [[ "$arch" == arm64 && "$(uname -m)" != aarch64 ]]; then
		if ! command -v qemu-aarch64-static >/dev/null; then
			echo "dist: qemu-aarch64-static is not installed: the linux-arm64 binary was built but not run"
			continue
		fi
		run=(qemu-aarch64-static "${run[@]}")
	fi
	got="$("${run[@]}")"
	[[ "$got" == *"$version"* ]] || { echo "dist: linux-$arch penguin version printed \"$got\", want $version" >&2; exit 1; }
	echo "dist: linux-$arch: $got"
done
# The listing is read whole first: grep -q stopping early would make
# unzip fail on a closed pipe, and pipefail report it.
listing="$(unzip -l "$work/a/penguin-$version-windows-amd64.zip")"
for f in penguin.exe README.md LICENSE; do
	grep -q "penguin-$version-windows-amd64/$f" <<<"$listing" ||
		{ echo "dist: the windows-amd64 archive lacks $f" >&2; exit 1; }
done
echo "dist: reproducible, $count archives"
