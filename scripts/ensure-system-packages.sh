#!/usr/bin/env bash
# Installs the Debian packages a profile needs, if any is missing:
#
#   scripts/ensure-system-packages.sh demo   what `npm start` (the demo) needs:
#     linux-headers-amd64  kernel headers the agent's kbuild compiles against
#     kmod                 depmod/modprobe/modinfo
#     make, gcc            kbuild
#     openssl              the test bed's PKI
#   scripts/ensure-system-packages.sh        (or `test`) what `npm test` needs: the demo's, plus
#     linux-image-amd64    the matching kernel the real-kernel tests boot under QEMU
#     qemu-system-x86      QEMU for the real-kernel tests
#     busybox-static       the guest's initramfs userland
#     and, side by side, the headers of every kernel ABI the apt sources serve
#     (scripts/ensure-next-kernel-headers.sh: the agent's next-kernel preflight tests)
#   scripts/ensure-system-packages.sh PROFILE --list   prints the profile's packages, installs nothing
# Go (for building the control plane) must already be on PATH; this script checks it.
set -euo pipefail

profile=${1:-test}
demo_packages=(linux-headers-amd64 kmod openssl make gcc)
case "$profile" in
  demo) packages=("${demo_packages[@]}") ;;
  test) packages=("${demo_packages[@]}" linux-image-amd64 qemu-system-x86 busybox-static) ;;
  *) echo "[setup] unknown profile '$profile' (demo or test)" >&2; exit 2 ;;
esac
if [ "${2:-}" = "--list" ]; then printf '%s\n' "${packages[@]}"; exit 0; fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing Debian packages for the $profile: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
      echo "[setup] not root and no sudo: install these packages first: ${missing[*]}" >&2; exit 1
    fi
  else SUDO=; fi
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

if [ "$profile" = test ]; then bash "$(dirname "${BASH_SOURCE[0]}")/ensure-next-kernel-headers.sh"; fi

if ! command -v go >/dev/null; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "[setup] note: go is at /usr/local/go/bin but not on PATH; test/bed/build-binaries.sh adds it" >&2
  else
    echo "[setup] Go 1.26 is needed to build the test bed's control plane from Go modules (https://go.dev/doc/install)" >&2
    exit 1
  fi
fi
