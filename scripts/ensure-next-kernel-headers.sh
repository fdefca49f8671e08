#!/usr/bin/env bash
# Installs, side by side, the kernel headers of every linux-headers-amd64 version the machine's
# apt sources serve (bookworm and bookworm-security usually carry different kernel ABIs, e.g.
# 6.1.0-50-amd64 and 6.1.0-56-amd64), so the agent's next-kernel preflight tests have a kernel
# with headers that is not the "running" one. Debian's linux-headers-<abi>-amd64 packages of one
# series install side by side (linux-kbuild-6.1 is shared, `>=`-versioned).
#
#   scripts/ensure-next-kernel-headers.sh           installs what is missing (idempotent)
#   scripts/ensure-next-kernel-headers.sh --list    prints the packages, installs nothing
#
# Called by scripts/ensure-system-packages.sh (test profile). Exits 1 when the sources serve
# fewer than two kernel ABIs: the preflight tests need two.
set -euo pipefail

log() { printf '[next-kernel headers] %s\n' "$*" >&2; }
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
apt() { $SUDO apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# linux-headers-<abi>-amd64 for each version of the meta-package the sources serve.
header_packages() {
  local version
  apt-cache madison linux-headers-amd64 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -u |
    while read -r version; do
      apt-cache show "linux-headers-amd64=$version" 2>/dev/null |
        sed -n 's/^Depends:.*\(linux-headers-[0-9][^ ,]*-amd64\).*/\1/p' | head -1
    done | sort -u
}

packages=$(header_packages)
if [ "$(printf '%s\n' "$packages" | grep -c .)" -lt 2 ]; then
  [ "${1:-}" = "--list" ] || { log "apt-get update (fewer than two kernel ABIs known)"; apt update -q >&2; packages=$(header_packages); }
fi
if [ "${1:-}" = "--list" ]; then printf '%s\n' "$packages"; exit 0; fi
if [ "$(printf '%s\n' "$packages" | grep -c .)" -lt 2 ]; then
  log "the apt sources serve fewer than two linux-headers-amd64 ABIs (found: ${packages:-none}); the next-kernel tests need two"
  exit 1
fi
missing=()
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt install -y -q --no-install-recommends "${missing[@]}" >&2
fi
