#!/bin/sh
# capture-gpu-node.sh: copies, read-only, what the driver-rollout agent reads on a GPU node into a
# fixture directory, so that detection, the restart-only decision and the version guard can run on
# it in CI (test/unit/agent/capture/). Nothing on the node is changed: the script only reads files
# and runs `nvidia-smi -q`; it never loads, unloads, resets or reconfigures anything, and writes
# only under the output directory (which must be new or empty).
#
# What it copies, in the layout the agent reads (SYSFS_ROOT=<out>/sys):
#   sys/bus/pci/devices/<addr>  -> sys/devices/pci0000:00/<addr>/   every PCI function of the given
#                                   vendors (default NVIDIA, 0x10de: GPUs, their audio functions,
#                                   NVSwitches): vendor, device, class, revision, subsystem ids,
#                                   numa_node, SR-IOV counts, and the links `driver`, `physfn`,
#                                   `virtfnN`, `iommu_group` and net/<ifname>/operstate
#   sys/module/<name>/             the loaded modules matching the patterns (default nvidia*):
#                                   refcnt, srcversion, version, initstate, taint, holders/,
#                                   the readable parameters/
#   proc/driver/nvidia/            version, params, gpus/<addr>/information (when the driver runs)
#   nvidia-smi-q.txt               `nvidia-smi -q` and its exit code (when nvidia-smi is found)
#   uname-r, os-release, capture.txt (when, what was asked, what was absent)
#
# Run it on a GPU node (as root, or any user that can read /sys and /proc/driver/nvidia), from a
# checkout or with the script copied there alone (POSIX sh and coreutils or busybox, nothing else):
#
#   sh scripts/capture-gpu-node.sh /tmp/gpu-node-capture
#   tar -C /tmp -czf gpu-node-capture.tgz gpu-node-capture      # bring it back, then:
#   tar -C test/fixtures/captures -xzf gpu-node-capture.tgz && mv test/fixtures/captures/gpu-node-capture test/fixtures/captures/<name>
#
# On a Kubernetes node without a shell: from a node debug pod, chrooted into the host's root
# (docs/gpu-node-capture.md):
#   kubectl debug node/NODE -i --image=debian:12 -- chroot /host sh -c "$(cat scripts/capture-gpu-node.sh)" capture-gpu-node /tmp/gpu-node-capture
#
# Options: --vendor 0x10de[,0x15b3]   PCI vendors to copy (the QEMU test uses 0x1af4, virtio)
#          --modules 'nvidia*[ ...]'  module name patterns (quoted; the QEMU test: 'drsample_*')
#          --sysfs DIR --proc DIR     where sysfs and procfs are (default /sys, /proc)
#          --nvidia-smi PATH          the nvidia-smi to run (default: the first on PATH)
set -eu

vendors=0x10de
modules='nvidia*'
sysfs=/sys
proc=/proc
smi=
out=

usage() {
  sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}
die() { echo "capture-gpu-node: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case $1 in
    --vendor) [ $# -ge 2 ] || die "--vendor needs a value"; vendors=$2; shift 2 ;;
    --modules) [ $# -ge 2 ] || die "--modules needs a value"; modules=$2; shift 2 ;;
    --sysfs) [ $# -ge 2 ] || die "--sysfs needs a value"; sysfs=$2; shift 2 ;;
    --proc) [ $# -ge 2 ] || die "--proc needs a value"; proc=$2; shift 2 ;;
    --nvidia-smi) [ $# -ge 2 ] || die "--nvidia-smi needs a value"; smi=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$out" ] || die "one output directory only (got $out and $1)"; out=$1; shift ;;
  esac
done
[ -n "$out" ] || die "usage: capture-gpu-node.sh [options] <output directory> (see --help)"
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then die "$out is not empty: give a new directory"; fi
[ -d "$sysfs/bus/pci/devices" ] || die "$sysfs/bus/pci/devices is not there: is $sysfs a sysfs?"
mkdir -p "$out/sys/bus/pci/devices" "$out/sys/bus/pci/drivers" "$out/sys/module"
absent=

# A file's content when it can be read (sysfs attributes may be write-only or absent); nothing else.
copy_file() {
  if [ -f "$1" ] && [ -r "$1" ] && cat "$1" > "$2.part" 2>/dev/null; then mv "$2.part" "$2"; else rm -f "$2.part"; fi
}
# A one-line sysfs attribute, with shell builtins only (a node may have thousands of them).
copy_attr() {
  [ -f "$1" ] && [ -r "$1" ] || return 0
  line=
  { IFS= read -r line || [ -n "$line" ]; } < "$1" 2>/dev/null || return 0
  printf '%s\n' "$line" > "$2"
}
base() { printf '%s' "${1##*/}"; }
link_name() { target=$(readlink "$1"); base "$target"; }
wanted_vendor() {
  old_ifs=$IFS; IFS=,
  for v in $vendors; do
    if [ "$v" = "$1" ]; then IFS=$old_ifs; return 0; fi
  done
  IFS=$old_ifs; return 1
}

# PCI functions of the vendors, as sysfs lays them out (the agent's fixture trees do the same).
pci_count=0
for dev in "$sysfs"/bus/pci/devices/*; do
  [ -e "$dev" ] || continue
  addr=${dev##*/}
  vendor=none
  [ ! -r "$dev/vendor" ] || read -r vendor < "$dev/vendor" || true
  wanted_vendor "$vendor" || continue
  pci_count=$((pci_count + 1))
  dir="$out/sys/devices/pci0000:00/$addr"
  mkdir -p "$dir"
  for attr in vendor device class revision subsystem_vendor subsystem_device numa_node sriov_totalvfs sriov_numvfs; do
    copy_attr "$dev/$attr" "$dir/$attr"
  done
  ln -s "../../../devices/pci0000:00/$addr" "$out/sys/bus/pci/devices/$addr"
  if [ -L "$dev/driver" ]; then
    driver=$(link_name "$dev/driver")
    mkdir -p "$out/sys/bus/pci/drivers/$driver"
    ln -s "../../../bus/pci/drivers/$driver" "$dir/driver"
  fi
  [ ! -L "$dev/physfn" ] || ln -s "../$(link_name "$dev/physfn")" "$dir/physfn"
  for vf in "$dev"/virtfn*; do
    [ -L "$vf" ] || continue
    ln -s "../$(link_name "$vf")" "$dir/${vf##*/}"
  done
  if [ -L "$dev/iommu_group" ]; then
    group=$(link_name "$dev/iommu_group")
    mkdir -p "$out/sys/kernel/iommu_groups/$group"
    ln -s "../../../kernel/iommu_groups/$group" "$dir/iommu_group"
  fi
  for ifdir in "$dev"/net/*; do
    [ -d "$ifdir" ] || continue
    mkdir -p "$dir/net/${ifdir##*/}"
    copy_attr "$ifdir/operstate" "$dir/net/${ifdir##*/}/operstate"
  done
done

# Loaded modules (a directory with refcnt; built-in ones have none) matching the patterns.
module_count=0
set -f
for pattern in $modules; do
  set +f
  for m in "$sysfs"/module/$pattern; do
    [ -f "$m/refcnt" ] || continue
    name=${m##*/}
    [ ! -e "$out/sys/module/$name" ] || continue
    module_count=$((module_count + 1))
    mkdir -p "$out/sys/module/$name/holders" "$out/sys/module/$name/parameters"
    for attr in refcnt srcversion version initstate taint coresize; do
      copy_attr "$m/$attr" "$out/sys/module/$name/$attr"
    done
    for holder in "$m"/holders/*; do
      [ -e "$holder" ] || [ -L "$holder" ] || continue
      ln -s "../../${holder##*/}" "$out/sys/module/$name/holders/${holder##*/}"
    done
    for param in "$m"/parameters/*; do
      [ -e "$param" ] || continue
      copy_attr "$param" "$out/sys/module/$name/parameters/${param##*/}"
    done
  done
  set -f
done
set +f

# The NVIDIA driver's own view, when it runs.
if [ -d "$proc/driver/nvidia" ]; then
  mkdir -p "$out/proc/driver/nvidia"
  copy_file "$proc/driver/nvidia/version" "$out/proc/driver/nvidia/version"
  copy_file "$proc/driver/nvidia/params" "$out/proc/driver/nvidia/params"
  for gpu in "$proc"/driver/nvidia/gpus/*; do
    [ -d "$gpu" ] || continue
    mkdir -p "$out/proc/driver/nvidia/gpus/${gpu##*/}"
    copy_file "$gpu/information" "$out/proc/driver/nvidia/gpus/${gpu##*/}/information"
  done
else
  absent="$absent $proc/driver/nvidia"
fi

# nvidia-smi -q: read-only queries of every GPU (no -r, -pm, -c or any other setting).
if [ -z "$smi" ]; then smi=$(command -v nvidia-smi || true); fi
if [ -n "$smi" ] && [ -x "$smi" ]; then
  rc=0
  "$smi" -q > "$out/nvidia-smi-q.txt" 2>&1 || rc=$?
  echo "$rc" > "$out/nvidia-smi-q.exit-code"
else
  absent="$absent nvidia-smi"
fi

uname -r > "$out/uname-r"
copy_file /etc/os-release "$out/os-release"
{
  echo "captured_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel=$(uname -r)"
  echo "vendors=$vendors"
  echo "modules=$modules"
  echo "pci_functions=$pci_count"
  echo "loaded_modules=$module_count"
  echo "absent=${absent# }"
} > "$out/capture.txt"
echo "capture-gpu-node: $pci_count PCI function(s), $module_count module(s) into $out${absent:+ (absent:$absent)}" >&2
