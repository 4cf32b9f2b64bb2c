#!/usr/bin/env bash
# The Kubernetes suite (`make k8s-test`): a real single-node Kubernetes
# (e2e/k8s/cluster) in network and mount namespaces of its own, Penguin's
# images from `make images` loaded into its containerd, the dev overlay
# applied with a scripted model (e2e/k8s/overlay), then the Go tests of
# this directory run against it from inside the cluster's network (all of
# them, or those PENGUIN_K8S_RUN matches, as go test -run does). The
# cluster is torn down on exit, whatever happened.
#
# Needs root and the Debian packages below. K8S_BIN_CACHE_DIR and
# IMAGE_CACHE (default /var/cache/penguin-ci) keep the built Kubernetes
# binaries and Debian root filesystems between runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
C=$REPO/e2e/k8s/cluster
source "$C/env.sh"
export K8S_BIN_CACHE_DIR=${K8S_BIN_CACHE_DIR:-/var/cache/penguin-ci}
export IMAGE_CACHE=${IMAGE_CACHE:-$K8S_BIN_CACHE_DIR/images}
NSP=penguin-dev
WORKSPACES=/var/lib/penguin-dev/workspaces # the dev overlay's node directory
t0=$(date +%s)
ts() { printf '\n==> [k8s %4ds] %s\n' "$(($(date +%s) - t0))" "$*"; }

# command:package, installed when the command is missing.
NEEDS=(etcd:etcd-server /usr/include/seccomp.h:libseccomp-dev /usr/lib/cni/bridge:containernetworking-plugins podman:podman
	iptables:iptables conntrack:conntrack debootstrap:debootstrap zstd:zstd openssl:openssl bc:bc)
missing=()
for n in "${NEEDS[@]}"; do
	c=${n%%:*}
	if [[ $c == /* ]]; then [ -e "$c" ] || missing+=("${n#*:}"); else command -v "$c" >/dev/null || missing+=("${n#*:}"); fi
done
if ((${#missing[@]})); then
	ts "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Kubernetes build and the images run side by side: the build's links
# use one core and debootstrap waits on the network and the disk, so each
# fills some of the other's idle time (on two cores, from cold caches: 1049 s
# for both, the images 340 s alone). A failed image build stops the build.
ts "Kubernetes binaries, and beside them the images (make images)"
bin_log=$(mktemp /tmp/penguin-k8s-bin.XXXXXX.log)
{ "$C/k8s-bin.sh" && "$C/runtime-bin.sh"; } >"$bin_log" 2>&1 &
k8s_bin=$!
make -s images || {
	kill "$k8s_bin" 2>/dev/null
	exit 1
}
ts "images built"
if ! wait "$k8s_bin"; then
	tail -40 "$bin_log"
	echo "building the Kubernetes binaries or the container runtime failed" >&2
	exit 1
fi
cat "$bin_log"
rm -f "$bin_log"
ts "Kubernetes binaries and the container runtime built"

teardown() {
	local rc=$?
	ts "teardown (suite exit status $rc)"
	if [ "$rc" != 0 ] && [ -f "$KUBECONFIG" ]; then
		"$C/kc" -n "$NSP" get pods -o wide 2>/dev/null || true
		for p in $("$C/kc" -n "$NSP" get pods -o name 2>/dev/null); do
			echo "--- logs of $p (last 30 lines)"
			"$C/kc" -n "$NSP" logs --all-containers --tail=30 "$p" 2>/dev/null || true
		done
	fi
	"$C/down.sh" --purge >/dev/null 2>&1 || true
	rm -rf "$WORKSPACES"
	ts "done"
}
trap teardown EXIT

ts "cluster up"
"$C/down.sh" --purge >/dev/null 2>&1 || true # a previous run killed before its teardown
rm -rf "$WORKSPACES"
"$C/up.sh"

ts "apply the dev overlay with the scripted model"
t_apply=$(date +%s)
"$C/kc" create namespace "$NSP" >/dev/null
secret() { openssl rand -hex 24; }
token=$(secret) pw=$(secret) key=$(secret)
"$C/kc" -n "$NSP" create secret generic penguin-auth --from-literal=token="$token" >/dev/null
"$C/kc" -n "$NSP" create secret generic penguin-postgres --from-literal=password="$pw" >/dev/null
"$C/kc" -n "$NSP" create secret generic penguin-store \
	--from-literal=url="postgres://penguin:$pw@penguin-postgres:5432/penguin?pool_max_conns=8" >/dev/null
"$C/kc" -n "$NSP" create secret generic penguin-providers --from-literal=mock-api-key="$key" >/dev/null
"$C/kc" -n "$NSP" create secret generic penguin-routes-key --from-literal=key="$(openssl rand -base64 32)" >/dev/null
# The web client's secret at the suite's identity provider (overlay/oidcop.yaml).
"$C/kc" -n "$NSP" create secret generic penguin-oidc --from-literal=client-secret="$(secret)" >/dev/null
"$C/kc" apply --server-side -k e2e/k8s/overlay >/dev/null
"$C/kc" -n "$NSP" wait --for=condition=Available deploy --all --timeout=300s
"$C/kc" -n "$NSP" get pods -o wide
echo "pods Ready $(($(date +%s) - t_apply)) s after the apply"

ts "the suite"
go test -c -o "$H/k8s.test" ./e2e/k8s
# The host's attack suite, static (the pod has no C library to spare), for
# TestAttackSuiteInPod to run inside an environment pod.
CGO_ENABLED=0 go test -c -o "$H/environment.test" ./services/environment
echo "$token" >"$H/token"
inns env -i PATH="$BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME="$H" SHELL=/bin/bash \
	KUBECONFIG="$KUBECONFIG" PENGUIN_K8S_NAMESPACE="$NSP" PENGUIN_K8S_TOKEN_FILE="$H/token" PENGUIN_K8S_ATTACK_SUITE="$H/environment.test" \
	PENGUIN_K8S_REPEAT="${PENGUIN_K8S_REPEAT:-5}" "$H/k8s.test" -test.v -test.run "${PENGUIN_K8S_RUN:-.}" -test.timeout "${PENGUIN_K8S_TIMEOUT:-40m}"
ts "suite passed"
