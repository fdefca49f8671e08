#!/usr/bin/env bash
# The real node's effects on the host, outside its work dir, made and undone here (root):
#
#   host.sh setup    DIR ID   before containerd and the kubelet start; also makes the node's pod
#                             network: a bridge with a free 10.250.N.0/24, written to DIR/pod-network.env,
#                             and DIR/host, where the agent's host paths go, a shared mount
#   host.sh teardown DIR ID   kills what the node runs, unmounts everything under DIR, removes
#                             its cgroups and its bridge, and, when it is the last real node on this machine,
#                             restores the sysctls the kubelet rewrites, removes the kubelet's
#                             iptables chains and the host directories the runtime hard-codes
#                             (when empty and made by us)
#   host.sh guard OWNER DIR ID   waits for process OWNER to end, then runs teardown and removes
#                             DIR (so a test runner killed with SIGKILL still leaves the machine
#                             as it was; the control plane's own files go at the next run's reaping)
#
# DIR is the node's work dir (kubelet and containerd roots, pod logs, host paths of the agent);
# ID names its cgroup (/drtest-ID in every hierarchy). Every step tolerates having been done:
# teardown may run twice (guard and the runner's stop), and after a crash.
set -uo pipefail
cmd=$1
state=/run/driver-rollout-real-node          # machine-wide: tmpfs, reset by a reboot like the sysctls
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Paths containerd 1.6 and the kubelet use whatever their configuration says.
hardcoded=(/var/log/containers /run/containerd/fifo /run/containerd/runc /run/containerd/s /run/containerd /run/netns /var/lib/cni/results /var/lib/cni)

log() { printf '[real-node host %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

hierarchies() { # every cgroup mount: v1 controllers and the hybrid "unified" v2 tree
  awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts | sort -u
}

setup() {
  local dir=$1 id=$2
  mkdir -p "$state/users"
  exec 7>"$state/lock"; flock 7
  prune_users
  if [ -z "$(ls -A "$state/users")" ]; then
    : > "$state/sysctl.saved"
    for s in "${sysctls[@]}"; do printf '%s=%s\n' "$s" "$(sysctl -n "$s")" >> "$state/sysctl.saved"; done
    : > "$state/created"
    for p in "${hardcoded[@]}"; do [ -e "$p" ] || echo "$p" >> "$state/created"; done
  fi
  printf '%s\n' "$dir" > "$state/users/$id"
  pod_network "$dir" "$id" || { flock -u 7; return 1; }
  flock -u 7
  shared_host_dir "$dir" || return 1
  for h in $(hierarchies); do
    mkdir -p "$h/drtest-$id"
    if [ -f "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" > "$h/drtest-$id/cpuset.cpus"; cat "$h/cpuset.mems" > "$h/drtest-$id/cpuset.mems"
    fi
  done
}

# The agent's host paths (DIR/host/...) on a mount of their own with shared propagation, as a
# systemd host's / is: a driver root the agent mounts under a Bidirectional volume (/run/nvidia)
# then reaches the host and the pods that mount it. This machine's / is private, and runc refuses
# a Bidirectional volume whose mount is not shared. Teardown unmounts it with the rest under DIR.
shared_host_dir() {
  local host=$1/host
  mkdir -p "$host"
  if ! mountpoint -q "$host"; then mount --bind "$host" "$host" || return 1; fi
  mount --make-shared "$host"
}

# The network of the node's pods that do not use the host's (CNI bridge plugin, isGateway false:
# no route, no NAT, no forwarding): a bridge of its own holding the subnet's .1, which those pods
# reach on-link (the test bed proxies the API server there). A /24 no interface has yet; under
# the machine-wide lock, so concurrent nodes pick different ones.
pod_network() {
  local dir=$1 id=$2 n bridge used
  bridge=drt$(printf '%s' "$id" | md5sum | cut -c1-8)
  used=$(ip -o -4 addr show | awk '{print $4}')
  for n in $(seq 1 254); do
    grep -q "^10\.250\.$n\." <<< "$used" || break
  done
  ip link del "$bridge" 2>/dev/null
  ip link add "$bridge" type bridge && ip addr add "10.250.$n.1/24" dev "$bridge" && ip link set "$bridge" up || { log "bridge $bridge not made"; return 1; }
  printf 'BRIDGE=%s\nSUBNET=10.250.%s.0/24\nGATEWAY=10.250.%s.1\n' "$bridge" "$n" "$n" > "$dir/pod-network.env"
}

# The chains every kubelet makes in iptables and ip6tables (its canary, the iptables-mode hint,
# and KUBE-FIREWALL, which drops non-loopback packets to 127.0.0.0/8), gone with the last node;
# left alone while another kubelet than ours runs on the machine.
remove_kubelet_chains() {
  local ipt t c
  pgrep -x kubelet >/dev/null && { log "a kubelet runs on this machine: its iptables chains stay"; return 0; }
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for c in INPUT OUTPUT; do
      while "$ipt" -w -D "$c" -j KUBE-FIREWALL 2>/dev/null; do :; done
    done
    for t in filter nat mangle; do
      for c in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$ipt" -w -t "$t" -F "$c" 2>/dev/null && "$ipt" -w -t "$t" -X "$c" 2>/dev/null
      done
    done
  done
  return 0
}

prune_users() { # forget nodes whose work dir is gone (their teardown never ran to the end)
  local u
  for u in "$state"/users/*; do
    [ -e "$u" ] || continue
    [ -d "$(cat "$u")" ] || rm -f "$u"
  done
}

node_pids() { # every process of the node: in its cgroups, or a containerd shim serving its socket
  local dir=$1 id=$2 h f pid
  for h in $(hierarchies); do
    [ -d "$h/drtest-$id" ] && find "$h/drtest-$id" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  for f in $(grep -l -a -F "$dir/" /proc/[0-9]*/cmdline 2>/dev/null); do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    case $(cat "/proc/$pid/comm" 2>/dev/null) in containerd-shim*) echo "$pid" ;; esac
  done
}

teardown() {
  local dir=$1 id=$2 pid pgid h m i bridge
  # The kubelet and containerd first (their process groups, recorded at start), so nothing restarts pods.
  for f in "$dir/kubelet.pgid" "$dir/containerd.pgid"; do
    [ -f "$f" ] && pgid=$(cat "$f") && [ "$pgid" -gt 1 ] && kill -KILL -- "-$pgid" 2>/dev/null
  done
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(node_pids "$dir" "$id" | sort -u)
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null
    sleep 0.5
  done
  [ -n "${pids:-}" ] && log "processes still running after kill: $pids"
  # The kubelet's links to this node's pod logs (the work dir, their target, goes after this).
  find /var/log/containers -maxdepth 1 -lname "$dir/*" -delete 2>/dev/null
  # Mounts under the work dir (pod volumes, container root filesystems, the kubelet's own bind), deepest first.
  for i in 1 2 3; do
    m=$(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
    [ -z "$m" ] && break
    while read -r p; do umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null; done <<< "$m"
  done
  # The pods' network namespaces are gone with the mounts (their veths with them): the bridge last.
  if [ -f "$dir/pod-network.env" ]; then
    bridge=$(sed -n 's/^BRIDGE=//p' "$dir/pod-network.env")
    [ -n "$bridge" ] && ip link show "$bridge" >/dev/null 2>&1 && { ip link del "$bridge" || log "bridge $bridge not removed"; }
  fi
  for h in $(hierarchies); do
    [ -d "$h/drtest-$id" ] && find "$h/drtest-$id" -depth -type d -exec rmdir {} \; 2>/dev/null
    [ -d "$h/drtest-$id" ] && log "cgroup $h/drtest-$id not removed"
  done
  mkdir -p "$state/users"
  exec 7>"$state/lock"; flock 7
  rm -f "$state/users/$id"
  prune_users
  if [ -z "$(ls -A "$state/users")" ] && [ -f "$state/sysctl.saved" ]; then
    while IFS== read -r k v; do
      [ "$(sysctl -n "$k")" = "$v" ] || sysctl -q -w "$k=$v" >/dev/null
    done < "$state/sysctl.saved"
    rm -f "$state/sysctl.saved"
    remove_kubelet_chains
    # Dangling pod-log links first, then the directories this machine did not have before, when empty.
    find /var/log/containers -maxdepth 1 -xtype l -delete 2>/dev/null
    # A directory we created holds only our nodes' files: shim sockets of SIGKILLed shims stay behind.
    while read -r p; do
      [ -d "$p" ] || continue
      [ "$p" = /run/containerd/s ] && find "$p" -maxdepth 1 -type s -delete
      rmdir "$p" 2>/dev/null
    done < "$state/created"
    rm -f "$state/created"
  fi
  flock -u 7
  return 0
}

case $cmd in
  setup) setup "$2" "$3" ;;
  teardown) teardown "$2" "$3" ;;
  guard)
    owner=$2
    while kill -0 "$owner" 2>/dev/null; do sleep 1; done
    [ -d "$3" ] || exit 0
    teardown "$3" "$4"
    # The node's files (containerd's root holds the imported images: ~1.5 GB) go now, not at the
    # next run's reaping; only once nothing is mounted under them, and never across a mount.
    if ! awk -v d="$3/" 'index($5, d) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
      rm -rf --one-file-system "$3"
    else
      log "mounts left under $3: not removed"
    fi
    ;;
  *) echo "usage: host.sh setup|teardown DIR ID | guard OWNER DIR ID" >&2; exit 64 ;;
esac
