# Settings of the test cluster, sourced by the other scripts. Everything
# the cluster writes lives under $H; its network is the namespace $NS.
export H=${H:-/tmp/penguin-k8s}            # all state lives here
export BIN=${BIN:-$H/bin}              # k8s binaries
export RBIN=${RBIN:-$H/runtime}        # the container runtime (runtime-bin.sh)
export NS=${NS:-penguin-k8s}               # network namespace name
export NODE_IP=${NODE_IP:-10.99.0.1}   # dummy non-loopback address inside the netns (kubelet refuses loopback node IPs)
export POD_CIDR=${POD_CIDR:-10.244.0.0/24}
export SVC_CIDR=${SVC_CIDR:-10.96.0.0/16}
export CLUSTER_DNS=${CLUSTER_DNS:-10.96.0.10} # the kube-dns Service (CoreDNS, coredns.yaml)
export NODE_NAME=${NODE_NAME:-penguin-k8s-node}
export PKI=$H/pki
export PATH=$BIN:$RBIN:/usr/local/go/bin:$PATH
export KUBECONFIG=$H/admin.kubeconfig
export CTR_SOCK=$H/run/containerd/containerd.sock
# run a command inside our netns + our mount ns (the one holding containerd/kubelet mounts)
inns() { nsenter --net=/var/run/netns/$NS --mount=$H/run/mntns --wd="$PWD" -- "$@"; }
# start a daemon inside the namespaces, new session, pid recorded from inside (exact PID of the daemon)
bg_start() { local n=$1; shift; mkdir -p $H/log $H/run; rm -f $H/run/$n.pid
  setsid nsenter --net=/var/run/netns/$NS --mount=$H/run/mntns -- sh -c 'echo $$ > "$0"; exec "$@"' $H/run/$n.pid "$@" > $H/log/$n.log 2>&1 < /dev/null &
  for i in $(seq 50); do [ -s $H/run/$n.pid ] && break; sleep 0.1; done; echo "started $n pid $(cat $H/run/$n.pid)"; }
