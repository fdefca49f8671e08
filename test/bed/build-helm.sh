#!/usr/bin/env bash
# Builds helm from Go modules (Debian bookworm has no helm package) into a cache outside the
# repository, keyed by version, for the chart tests (`helm lint`, `helm template`) and for
# scripts/render-kustomize.sh. A warm cache skips the build.
#
#   test/bed/build-helm.sh            # prints the helm binary's path on its last line
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=go-download.sh
source "$here/go-download.sh"

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
key="helm-${HELM_VERSION}"
bin="$cache/bin/$key"
helm="$bin/helm"

log() { printf '[helm build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ -x "$helm" ] && [ -f "$bin/.complete" ]; then
  log "warm cache: $helm"
  echo "$helm"
  exit 0
fi

[ -x /usr/local/go/bin/go ] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { log "go is not installed; helm is built from Go modules"; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$bin"
# One builder at a time per version; a second waits, then finds the cache warm.
exec 9>"$bin/.lock"
flock 9
if [ -f "$bin/.complete" ]; then log "warm cache (built by a concurrent run): $helm"; echo "$helm"; exit 0; fi

started=$SECONDS
major=${HELM_VERSION%%.*}
log "building helm $HELM_VERSION (helm.sh/helm/$major)"
GOBIN="$bin" go_downloading install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/$major/cmd/helm@$HELM_VERSION"
touch "$bin/.complete"
log "built helm $HELM_VERSION in $((SECONDS - started)) s"
echo "$helm"
