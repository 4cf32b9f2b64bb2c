#!/bin/bash
# Start kubelet inside the netns/mntns. Needs containerd-up.sh and cp-up.sh first.
set -euo pipefail
source "$(dirname "$0")/env.sh"
R=$(dirname "$0")
mkdir -p $H/kubelet $H/pod-logs $H/log
sed "s#@H@#$H#g; s#@PKI@#$PKI#g; s#@CTR_SOCK@#$CTR_SOCK#g; s#@CLUSTER_DNS@#$CLUSTER_DNS#g" $R/kubelet-config.yaml.in > $H/kubelet-config.yaml
# cgroup root for kubelet (v1: one dir per hierarchy; cpuset needs cpus/mems copied)
for c in /sys/fs/cgroup/*/; do
  [ "$(basename $c)" = unified ] && continue
  mkdir -p $c/penguin-k8s
  if [ -f $c/cpuset.cpus ]; then cat $c/cpuset.cpus > $c/penguin-k8s/cpuset.cpus; cat $c/cpuset.mems > $c/penguin-k8s/cpuset.mems; fi
done
bg_start kubelet $BIN/kubelet --config=$H/kubelet-config.yaml --kubeconfig=$H/kubelet.kubeconfig \
  --root-dir=$H/kubelet --node-ip=$NODE_IP --hostname-override=$NODE_NAME --v=1
t0=$(date +%s)
for i in $(seq 120); do
  inns kubectl get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True && break; sleep 1; done
inns kubectl get nodes -o wide; echo "node ready after $(( $(date +%s)-t0 )) s"
