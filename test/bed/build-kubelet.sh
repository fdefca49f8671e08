#!/usr/bin/env bash
# Builds the real node's kubelet from Go modules (same wrapper-module method and version as
# build-binaries.sh) into a cache outside the repository under its own key. A warm cache skips
# the build. Only the real-node profile needs it (test/real-node/).
#
#   test/bed/build-kubelet.sh            # prints the bin directory on its last line
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=kubernetes-go-build.sh
source "$here/kubernetes-go-build.sh"

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
key="kubelet-${KUBERNETES_VERSION}"
bin="$cache/bin/$key"
work="$cache/build/$key"

log() { printf '[kubelet build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
is_complete() { [ -x "$bin/kubelet" ] && [ -f "$bin/.complete" ]; }

if is_complete; then log "warm cache: $bin"; echo "$bin"; exit 0; fi

setup_go "the real node's kubelet"
mkdir -p "$bin" "$work"
exec 9>"$work/.lock"
flock 9
if is_complete; then log "warm cache (built by a concurrent run): $bin"; echo "$bin"; exit 0; fi
started=$SECONDS

write_kubernetes_wrapper "$work" driverrollout.test/kubelet-build kubelet
build_kubernetes_command "$work" kubelet "$bin/kubelet"
touch "$bin/.complete"
log "built kubelet in $((SECONDS - started)) s"
echo "$bin"
