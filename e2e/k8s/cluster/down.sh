#!/bin/bash
# Tear everything down: stop our processes by PID, remove pods/containers, cgroups, mounts, netns.
# down.sh --purge additionally deletes etcd data, containerd images, kubelet dir.
source "$(dirname "$0")/env.sh"
stop() { local f=$H/run/$1.pid; [ -f $f ] || return 0; local p=$(cat $f)
  if kill -0 $p 2>/dev/null; then kill $p; for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.2; done; kill -9 $p 2>/dev/null; fi; rm -f $f; }
stop kubelet
# kill pod containers via containerd (CRI) before stopping it
if [ -S $CTR_SOCK ]; then
  for t in $(inns ctr -a $CTR_SOCK -n k8s.io tasks ls -q 2>/dev/null); do inns ctr -a $CTR_SOCK -n k8s.io tasks kill -s KILL $t >/dev/null 2>&1; done
  sleep 1
  for t in $(inns ctr -a $CTR_SOCK -n k8s.io tasks ls -q 2>/dev/null); do inns ctr -a $CTR_SOCK -n k8s.io tasks delete -f $t >/dev/null 2>&1; done
  for c in $(inns ctr -a $CTR_SOCK -n k8s.io containers ls -q 2>/dev/null); do inns ctr -a $CTR_SOCK -n k8s.io containers delete $c >/dev/null 2>&1; done
fi
for n in kube-scheduler kube-controller-manager kube-proxy kube-apiserver etcd containerd; do stop $n; done
# containerd-shim processes we spawned (children re-parented; find by our socket path in their cmdline)
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $CTR_SOCK" 2>/dev/null); do kill $p 2>/dev/null; done
sleep 1
# remove our cgroups (deepest first)
for c in /sys/fs/cgroup/*/penguin-k8s; do [ -d $c ] && find $c -depth -type d -exec rmdir {} \; 2>/dev/null; done
# the mount namespace dies with the last process + its bind file; netns last
umount $H/run/mntns 2>/dev/null; umount -l $H/run 2>/dev/null
ip netns del $NS 2>/dev/null
if [ "${1:-}" = --purge ]; then
  rm -rf $H/etcd $H/kubelet $H/pod-logs $H/cni/ipam $H/log
  # host paths the components hard-code: log symlinks into $H, libcni result cache for our network
  find /var/log/containers -maxdepth 1 -type l -lname "$H/*" -delete 2>/dev/null
  rm -f /var/lib/cni/results/$NS-* 2>/dev/null
  [ -d $H/containerd/root ] && { find $H/containerd/root -type d -name rootfs -exec umount {} \; 2>/dev/null; rm -rf $H/containerd/root; }
fi
echo "down."
