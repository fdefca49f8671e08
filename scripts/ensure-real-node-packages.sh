#!/usr/bin/env bash
# Installs the Debian packages the real-node test project needs, if any is missing
# (see test/real-node/README.md):
#   buildah, uidmap, conmon           build the images without a daemon (runc as the OCI runtime)
#   mmdebstrap                        the Debian rootfs of the local base image
#   containerd, runc                  the real node's container runtime
#   containernetworking-plugins       the node's CNI plugins: bridge + host-local for the coordinator pods, loopback
#   iproute2, procps                  host.sh: the pod-network bridge (ip), other kubelets on the machine (pgrep)
# Idempotent: a machine that has them all returns at once.
set -euo pipefail

packages=(buildah uidmap conmon mmdebstrap containerd runc containernetworking-plugins iproute2 procps)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "[setup] installing Debian packages for the real node: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "[setup] not root and no sudo: install these packages first: ${missing[*]}" >&2; exit 1
  fi
else SUDO=; fi
# The packages ship systemd units only: installing them starts no daemon on a machine without
# systemd. The test bed starts its own containerd with its own config (test/bed/real-node/).
$SUDO apt-get update -q >&2 || true
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
