#!/bin/busybox sh
# PID 1 of the kernel-test guest (see boot-guest.ts for the host side).
#
# Boots into the HOST's own root file system: the host's / is shared read-only over 9p and put
# under an overlay with a tmpfs upper layer, so the guest runs the host's Node, kmod and project
# sources at their usual paths while everything it writes (depmod output, /etc/modprobe.d, ...)
# stays in guest memory. The host's work dir (dr.work= on the kernel command line) is shared
# read-write at the same path: commands arrive there and their results go back. So are the
# host dirs listed in dr.rw= (caches meant to outlive the guest).
#
# Protocol, in <work>/commands: the host writes N.sh (atomically, by rename) for N = 1, 2, ...;
# the guest runs it with sh inside the chroot, stdout to N.out, stderr to N.err, then writes
# the exit code to N.rc (by rename). A file named "poweroff" ends the guest, and so does
# dr.idle= seconds without a command (a backstop should the host side die without killing us).
# Console markers: DR-GUEST-READY when commands are accepted, DR-GUEST-FAILED: <why> otherwise.

/bin/busybox --install -s /bin
export PATH=/bin

fail() {
  echo "DR-GUEST-FAILED: $*"
  poweroff -f
}

mount -t proc proc /proc || fail "mount /proc"
mount -t sysfs sysfs /sys || fail "mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "mount /dev"

for m in $(cat /lib/modules/order); do
  insmod "/lib/modules/$m.ko" || fail "insmod $m"
done

work=
idle=120
writable=
disk=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    dr.work=*) work="${arg#dr.work=}" ;;
    dr.idle=*) idle="${arg#dr.idle=}" ;;
    dr.rw=*) writable="${arg#dr.rw=}" ;;
    dr.disk=*) disk="${arg#dr.disk=}" ;;
  esac
done
[ -n "$work" ] || fail "no dr.work= on the kernel command line"

# msize: 6.1 defaults to 8 KiB messages, which makes reading node_modules very slow.
# cache=loose on the read-only host share: the guest may keep what it has read, so whatever the
# host writes after the boot goes to the work dir or a dr.rw= dir (cache=none), never elsewhere.
p9=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$p9,ro,cache=loose" host /host || fail "mount the host share"
mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount the overlay's tmpfs"
mkdir /rw/upper /rw/work
# dr.disk=DIR (shared read-write as tag "disk"): the node's disk. What an earlier guest saved in
# DIR/upper (its overlay's upper layer: every file it changed outside /run, /proc, /sys, /dev and
# the shares) becomes this guest's starting point: a reboot of the same node.
if [ -n "$disk" ]; then
  mkdir -p /disk && mount -t 9p -o "$p9" disk /disk || fail "mount the disk share"
  if [ -d /disk/upper ]; then cp -a /disk/upper/. /rw/upper/ || fail "restore the disk"; fi
fi
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || fail "mount the overlay root"
mount -t proc proc /newroot/proc || fail "mount /proc in the root"
mount -t sysfs sysfs /newroot/sys || fail "mount /sys in the root"
mount -t devtmpfs devtmpfs /newroot/dev || fail "mount /dev in the root"
# A fresh /run, as after a boot (the host's holds its own state, e.g. /run/modprobe.d). /tmp is
# left as the overlay shows it: a checkout or work dir may live there.
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "mount /run"
mkdir -p "/newroot$work" && mount -t 9p -o "$p9" work "/newroot$work" || fail "mount the work share at $work"
# dr.rw=DIR0,DIR1,...: more host dirs shared read-write (tags rw0, rw1, ...) at their own paths.
i=0
for dir in $(echo "$writable" | tr ',' ' '); do
  mkdir -p "/newroot$dir" && mount -t 9p -o "$p9" "rw$i" "/newroot$dir" || fail "mount the writable share at $dir"
  i=$((i + 1))
done

# The upper layer, read-only inside the root, for saving the disk (see boot-guest.ts saveDisk).
if [ -n "$disk" ]; then
  mkdir -p /newroot/run/dr-disk && mount --bind /rw/upper /newroot/run/dr-disk && mount -o remount,bind,ro /newroot/run/dr-disk || fail "expose the upper layer"
  mkdir -p /newroot/run/dr-disk-share && mount --bind /disk /newroot/run/dr-disk-share || fail "expose the disk share"
fi

commands="/newroot$work/commands"
[ -d "$commands" ] || fail "$work/commands does not exist"
echo "DR-GUEST-READY $(uname -r)"

n=1
ticks=0
while :; do
  if [ -f "$commands/$n.sh" ]; then
    env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      chroot /newroot /bin/sh "$work/commands/$n.sh" >"$commands/$n.out" 2>"$commands/$n.err" </dev/null
    echo $? >"$commands/$n.rc.tmp" && mv "$commands/$n.rc.tmp" "$commands/$n.rc"
    n=$((n + 1))
    ticks=0
  elif [ -f "$commands/poweroff" ]; then
    break
  elif [ "$ticks" -ge $((idle * 20)) ]; then
    echo "DR-GUEST-IDLE: no command for ${idle}s, powering off"
    break
  else
    sleep 0.05
    ticks=$((ticks + 1))
  fi
done
sync
poweroff -f
