#!/usr/bin/env bash
# Fetches the real vendor driver sources the vendor-drivers tests build, as Debian packages,
# without installing them (no maintainer scripts, no DKMS hooks), into a cache keyed by version:
#
#   ~/.cache/driver-rollout/vendor/<package>_<version>/        the unpacked package (dpkg-deb -x)
#
# It adds one apt sources file of its own, /etc/apt/sources.list.d/driver-rollout-vendor.sources,
# with the components contrib, non-free and non-free-firmware for the suites and mirrors of the
# machine's existing Debian sources (deb822 debian.sources or a one-line sources.list), and
# installs `dkms` (--no-install-recommends), which the agent's dkms recipe runs.
#
# Packages (bookworm), pinned where the NVIDIA build needs it:
# - nvidia-open-kernel-dkms 535.261.03-1 (contrib): NVIDIA's OPEN GPU kernel modules, with
#   firmware-nvidia-gsp 535.261.03-1 (non-free-firmware), the GSP firmware of the same release
#   (nvidia/535.261.03/gsp_*.bin; the open modules cannot run without it). Both pinned, and
#   their upstream releases must agree (checked below).
# - the kernel they build for: linux-headers-6.1.0-50-amd64 is installed (next to whatever
#   scripts/ensure-next-kernel-headers.sh installs), and linux-image-6.1.0-50-amd64 is fetched
#   and unpacked, never installed: the kernel test boots it under QEMU and takes its inbox
#   modules (drm, i2c_core, video...) from the unpacked tree (depmod'ed there, under
#   lib/modules/<kernel>). Why not the newest ABI (6.1.0-56): Debian backported to 6.1.0-56 the
#   four-argument pci_resize_resource(dev, i, size, exclude_bars), and 535.261.03 (bookworm's
#   only open package, not updated in bookworm-security) predates it:
#     nvidia/nv-pci.c:223:9: error: too few arguments to function 'pci_resize_resource'
#   6.1.0-50's include/linux/pci.h still has the three-argument form, so it builds there.
#   The proprietary nvidia-kernel-dkms 535.309.01 (bookworm-security) does build on 6.1.0-56
#   but is not what the tests build any more (one cold NVIDIA build per CI run).
#   When bookworm's mirror stops serving ABI 6.1.0-50 (a point release moves main and
#   security past it), both pins must move together to an open package that builds there.
# - nvidia-kernel-dkms 535.309.01-0+deb12u1 (bookworm-security, non-free): NVIDIA's proprietary
#   modules, which build on the newest ABI (6.1.0-56), with firmware-nvidia-gsp of the same
#   release: the `nvidia` flavour of the driver images (drivers/flavours.ts).
# - the user space of each NVIDIA release, pinned at the modules' version (non-free; bookworm
#   main has 535.261.03, bookworm-security 535.309.01): libcuda1, libnvidia-ml1, libnvidia-cfg1,
#   nvidia-smi and the rest of what NVIDIA's container toolkit looks up for the `utility` and
#   `compute` capabilities (libnvidia-ptxjitcompiler1, libnvidia-nvvm4, libcudadebugger1,
#   libnvidia-allocator1, libnvidia-pkcs11-openssl3, nvidia-cuda-mps), each release's list
#   following its modules package; drivers/stage-driver-root.ts makes the driver root of the
#   images from them, with libc6, libgcc-s1 and libssl3 (apt's candidates) so that the root can be
#   chrooted into, as NVIDIA's validator does with `chroot /run/nvidia/driver nvidia-smi`.
#   The version guard's test sets the 535.309.01 user space against the open 535.261.03 modules (a
#   real mismatch) and the proprietary ones (a match).
# - nvidia-persistenced 535.171.04 (contrib): Debian's one version, which its libcuda1 of both
#   releases recommends (`nvidia-persistenced (>= 535)`; it talks to the driver through the
#   root's libnvidia-cfg, --nvidia-cfg-path, so it does not follow the modules' version); the
#   NVIDIA images' roots carry it and the agent runs it beside the loaded driver.
# - r8168-dkms (non-free), at apt's candidate.
# Prints `<package> <directory>` per package on stdout; a package pinned at two versions (the
# GSP firmware of each NVIDIA release) gets a line each, the directory naming the version.
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

# The kernel ABI the NVIDIA open modules build for (and the kernel test boots), see above.
nvidia_kernel=6.1.0-50-amd64
# <package>[=<pinned version>]; a package without a pin is taken at apt's candidate. Each NVIDIA
# modules package is followed by the GSP firmware of its release (checked below).
# Each NVIDIA release's user space (drivers/flavours.ts's userSpacePackages) follows its firmware;
# nvidia-persistenced (one version for both, see above) comes after the last release's checks.
nvidia_user_space=(libcuda1 libnvidia-ml1 libnvidia-cfg1 nvidia-smi libnvidia-ptxjitcompiler1 libnvidia-nvvm4
  libcudadebugger1 libnvidia-allocator1 libnvidia-pkcs11-openssl3 nvidia-cuda-mps)
user_space_of() { local p; for p in "${nvidia_user_space[@]}"; do echo "$p=$1"; done; }
# shellcheck disable=SC2207 # package names have no spaces
packages=(nvidia-open-kernel-dkms=535.261.03-1 firmware-nvidia-gsp=535.261.03-1 $(user_space_of 535.261.03-1)
  nvidia-kernel-dkms=535.309.01-0+deb12u1 firmware-nvidia-gsp=535.309.01-0+deb12u1 $(user_space_of 535.309.01-0+deb12u1)
  nvidia-persistenced=535.171.04-1~deb12u1 libc6 libgcc-s1 libssl3 r8168-dkms "linux-image-$nvidia_kernel")
sources_file=/etc/apt/sources.list.d/driver-rollout-vendor.sources
components="contrib non-free non-free-firmware"

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
vendor="$cache/vendor"

log() { printf '[vendor packages %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
else SUDO=; fi

# The machine's Debian sources as deb822 stanzas with our components instead of theirs.
vendor_sources() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    awk -v comps="$components" '
      /^[[:space:]]*#/ { next }
      /^Components:/ { print "Components: " comps; next }
      { print }
    ' /etc/apt/sources.list.d/debian.sources
    return
  fi
  # One-line format: deb [options] URI suite components...
  grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list 2>/dev/null \
    | grep -E 'debian' \
    | awk -v comps="$components" '{
        i = 2; opts = ""
        if ($2 ~ /^\[/) { while ($i !~ /\]$/) { opts = opts " " $i; i++ } opts = opts " " $i; i++ }
        uri = $i; suite = $(i + 1)
        print "Types: deb"; print "URIs: " uri; print "Suites: " suite; print "Components: " comps
        if (opts ~ /signed-by=/) { match(opts, /signed-by=[^] ]+/); print "Signed-By: " substr(opts, RSTART + 10, RLENGTH - 10) }
        print ""
      }'
}

ensure_sources() {
  local wanted
  wanted=$(vendor_sources)
  if [ -z "$wanted" ]; then
    log "no Debian apt sources found in /etc/apt/sources.list(.d); cannot add $components"
    exit 1
  fi
  if [ -f "$sources_file" ] && [ "$(cat "$sources_file")" = "$wanted" ]; then return 1; fi
  log "writing $sources_file (components: $components)"
  printf '%s\n' "$wanted" | $SUDO tee "$sources_file" >/dev/null
  return 0
}

candidate_version() {
  apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p'
}

# apt's locks may be held by another setup script on the same machine: wait for them.
apt() { $SUDO apt-get -o DPkg::Lock::Timeout=600 "$@"; }
updated=no
apt_update() {
  [ "$updated" = yes ] && return
  log "apt-get update"
  local try
  for try in $(seq 60); do
    apt update -q >&2 && { updated=yes; return; }
    log "apt-get update failed (try $try; another apt may hold the lists lock); retrying in 10 s"
    sleep 10
  done
  exit 1
}

# Fast path: the versions resolved last time still hold while apt's lists and our sources file
# are unchanged, and every package directory is complete.
resolved="$vendor/resolved"
name_of() { echo "${1%%=*}"; }
pin_of() { case $1 in *=*) echo "${1#*=}" ;; esac; }
all_complete() {
  local name dir i=0
  while read -r name dir; do
    [ "$name" = "$(name_of "${packages[$i]:-}")" ] && [ -f "$dir/.complete" ] || return 1
    i=$((i + 1))
  done < "$resolved"
}
headers_installed() { [ -f "/usr/src/linux-headers-$nvidia_kernel/Makefile" ]; }
if [ -f "$resolved" ] && [ -f "$sources_file" ] && command -v dkms >/dev/null && headers_installed \
  && [ -z "$(find /var/lib/apt/lists "$sources_file" -maxdepth 1 -newer "$resolved" -print -quit 2>/dev/null)" ] \
  && [ "$(wc -l < "$resolved")" -eq "${#packages[@]}" ] \
  && all_complete; then
  cat "$resolved"
  exit 0
fi

if ensure_sources; then apt_update; fi

if ! command -v dkms >/dev/null; then
  apt_update
  log "installing dkms (--no-install-recommends)"
  DEBIAN_FRONTEND=noninteractive apt install -y -q --no-install-recommends dkms >&2
fi

if ! headers_installed; then
  apt_update
  log "installing linux-headers-$nvidia_kernel (--no-install-recommends): the NVIDIA open modules build for it"
  DEBIAN_FRONTEND=noninteractive apt install -y -q --no-install-recommends "linux-headers-$nvidia_kernel" >&2
fi

mkdir -p "$vendor"
exec 9>"$vendor/.lock"
flock 9
rm -f "$resolved.tmp"

# The GSP firmware must be the release the modules were built from (nvidia/<version>/gsp_*.bin):
# both packages are pinned, and their upstream releases must agree.
version_of() { # <package> <pinned version or "">
  local v
  if [ -n "$2" ]; then
    # A pinned version must be one apt knows (any suite), else it is gone from the mirror.
    apt-cache madison "$1" 2>/dev/null | awk -F'|' -v want="$2" '{ gsub(/ /, "", $2) } $2 == want { print $2; exit }'
    return
  fi
  v=$(candidate_version "$1")
  [ "$v" = "(none)" ] || echo "$v"
}
upstream_of() { local v=${1#*:}; echo "${v%-*}"; }

# The unpacked kernel package as an installed kernel under <dir>/root: modules.dep etc. from depmod
# against its own System.map (the package's postinst would do that on a real install).
prepare_kernel_tree() {
  local root=$1 kver=${2#linux-image-}
  depmod -b "$root" -F "$root/boot/System.map-$kver" "$kver"
  [ -f "$root/lib/modules/$kver/modules.dep" ] || { log "depmod wrote no $root/lib/modules/$kver/modules.dep"; exit 1; }
}

for entry in "${packages[@]}"; do
  p=$(name_of "$entry")
  pin=$(pin_of "$entry")
  version=$(version_of "$p" "$pin")
  if [ -z "$version" ]; then
    apt_update
    version=$(version_of "$p" "$pin")
  fi
  if [ -z "$version" ]; then
    log "apt has no ${pin:+version $pin of }$p (are $components enabled in $sources_file? is it still on the mirror?)"
    exit 1
  fi
  case $p in
    nvidia-open-kernel-dkms | nvidia-kernel-dkms) nvidia_package=$p nvidia_version=$version ;;
    firmware-nvidia-gsp | libcuda1 | libnvidia-* | libcudadebugger1 | nvidia-smi | nvidia-cuda-mps)
      if [ "$(upstream_of "$version")" != "$(upstream_of "$nvidia_version")" ]; then
        log "the pinned versions differ in upstream release: $nvidia_package $nvidia_version, $p $version (the modules need the GSP firmware and the user space of their own release: nvidia/<release>/gsp_*.bin, libcuda.so.<release>)"
        exit 1
      fi ;;
  esac
  dir="$vendor/${p}_${version}"
  if [ ! -f "$dir/.complete" ]; then
    log "fetching $p $version"
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$dir.tmp"
    (cd "$dir.tmp" && apt-get download -q "$p=$version" >&2)
    deb=$(ls "$dir.tmp"/*.deb)
    dpkg-deb -x "$deb" "$dir.tmp/root"
    case $p in linux-image-*) prepare_kernel_tree "$dir.tmp/root" "$p" ;; esac
    mv "$deb" "$dir.tmp/package.deb"
    touch "$dir.tmp/.complete"
    mv "$dir.tmp" "$dir"
  fi
  echo "$p $dir"
  echo "$p $dir" >> "$resolved.tmp"
done
mv "$resolved.tmp" "$resolved"
