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

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
key="kubelet-${KUBERNETES_VERSION}"
bin="$cache/bin/$key"
work="$cache/build/$key"

log() { printf '[kubelet build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
is_complete() { [ -x "$bin/kubelet" ] && [ -f "$bin/.complete" ]; }

if is_complete; then log "warm cache: $bin"; echo "$bin"; exit 0; fi

[ -x /usr/local/go/bin/go ] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { log "go is not installed; the real node's kubelet is built from Go modules"; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$bin" "$work"
exec 9>"$work/.lock"
flock 9
if is_complete; then log "warm cache (built by a concurrent run): $bin"; echo "$bin"; exit 0; fi
started=$SECONDS

# A wrapper module replacing every staging module with its published version (as build-binaries.sh).
log "resolving k8s.io/kubernetes@$KUBERNETES_VERSION"
upstream_mod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
staging_version="v0${KUBERNETES_VERSION#v1}"
{
  echo "module driverrollout.test/kubelet-build"
  echo
  echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/').0"
  echo
  echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
  echo
  grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$upstream_mod" \
    | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
  echo "tool k8s.io/kubernetes/cmd/kubelet"
} > "$work/go.mod"
(cd "$work" && log "go mod tidy (downloads modules)" && go mod tidy)
major=${KUBERNETES_VERSION#v}; major=${major%%.*}
minor=${KUBERNETES_VERSION#v*.}; minor=${minor%%.*}
ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
log "building kubelet $KUBERNETES_VERSION"
(cd "$work" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/kubelet" k8s.io/kubernetes/cmd/kubelet)
touch "$bin/.complete"
log "built kubelet in $((SECONDS - started)) s"
echo "$bin"
