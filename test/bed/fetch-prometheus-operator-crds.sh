#!/usr/bin/env bash
# Fetches prometheus-operator's ServiceMonitor and PrometheusRule CRDs (the chart's optional
# monitoring objects need them) from its Go module at PROMETHEUS_OPERATOR_VERSION
# (test/bed/versions.env) into a cache outside the repository, keyed by version. The Go module
# proxy serves the repository's zip, which holds example/prometheus-operator-crd/. Warm: at once.
#
#   test/bed/fetch-prometheus-operator-crds.sh    # prints the CRD directory on its last line
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=go-download.sh
source "$here/go-download.sh"

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
dir="$cache/monitoring/prometheus-operator-crds-${PROMETHEUS_OPERATOR_VERSION}"
crds=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

log() { printf '[prometheus-operator crds %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ -f "$dir/.complete" ]; then log "warm cache: $dir"; echo "$dir"; exit 0; fi

[ -x /usr/local/go/bin/go ] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { log "go is not installed; the CRDs come from the Go module proxy"; exit 1; }
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -f "$dir/.complete" ]; then log "warm cache (fetched by a concurrent run): $dir"; echo "$dir"; exit 0; fi

module="github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION}"
log "go mod download $module"
# Outside any module: GOFLAGS=-mod=mod would need a go.mod; the download needs none.
json=$(cd "$(mktemp -d)" && GOTOOLCHAIN=local GOFLAGS= go_download_json "$module")
src=$(printf '%s' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] && [ -d "$src/example/prometheus-operator-crd" ] || { log "no example/prometheus-operator-crd in the module: $json"; exit 1; }
# install, not cp: the module cache is read-only, and a rerun after an interruption must overwrite.
for f in "${crds[@]}"; do install -m 0644 "$src/example/prometheus-operator-crd/$f" "$dir/$f"; done
touch "$dir/.complete"
log "cached ${crds[*]} of $PROMETHEUS_OPERATOR_VERSION in $dir"
echo "$dir"
