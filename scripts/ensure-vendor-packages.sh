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
# Packages (bookworm): nvidia-kernel-dkms (non-free; NVIDIA's proprietary-flavour kernel modules,
# 535.309.01 from bookworm-security), firmware-nvidia-gsp (non-free-firmware) of the same upstream
# release, r8168-dkms (non-free). Prints `<package> <directory>` per package on stdout.
#
# Not nvidia-open-kernel-dkms (contrib): bookworm's only version, 535.261.03-1, fails to compile
# against bookworm's 6.1.0-56 headers (nv-pci.c:223: too few arguments to function
# 'pci_resize_resource'; Debian's kernel backported the API change, the open package was not
# updated in bookworm-security). See agent/README.md, "NVIDIA GPU driver".
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

packages=(nvidia-kernel-dkms firmware-nvidia-gsp r8168-dkms)
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
all_complete() {
  local name dir i=0
  while read -r name dir; do
    [ "$name" = "${packages[$i]:-}" ] && [ -f "$dir/.complete" ] || return 1
    i=$((i + 1))
  done < "$resolved"
}
if [ -f "$resolved" ] && [ -f "$sources_file" ] && command -v dkms >/dev/null \
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

mkdir -p "$vendor"
exec 9>"$vendor/.lock"
flock 9
rm -f "$resolved.tmp"

# The GSP firmware must be the release the modules were built from (nvidia/<version>/gsp_*.bin):
# both packages are taken at apt's candidate, and their upstream releases must agree.
version_of() {
  local v
  v=$(candidate_version "$1")
  [ "$v" = "(none)" ] || echo "$v"
}
upstream_of() { local v=${1#*:}; echo "${v%-*}"; }

for p in "${packages[@]}"; do
  version=$(version_of "$p")
  if [ -z "$version" ]; then
    apt_update
    version=$(version_of "$p")
  fi
  if [ -z "$version" ]; then
    log "apt has no candidate for $p (are $components enabled in $sources_file?)"
    exit 1
  fi
  case $p in
    nvidia-kernel-dkms) nvidia_version=$version ;;
    firmware-nvidia-gsp)
      if [ "$(upstream_of "$version")" != "$(upstream_of "$nvidia_version")" ]; then
        log "apt's candidates differ in upstream release: nvidia-kernel-dkms $nvidia_version, firmware-nvidia-gsp $version (the modules need the GSP firmware of their own release, nvidia/<release>/gsp_*.bin)"
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
    mv "$deb" "$dir.tmp/package.deb"
    touch "$dir.tmp/.complete"
    mv "$dir.tmp" "$dir"
  fi
  echo "$p $dir"
  echo "$p $dir" >> "$resolved.tmp"
done
mv "$resolved.tmp" "$resolved"
