#!/usr/bin/env bash
# Fetches Debian bookworm's `prometheus` package (PROMETHEUS_DEB_VERSION, test/bed/versions.env)
# and unpacks it into a cache outside the repository, keyed by version: the real `prometheus` and
# `promtool` binaries for the chart's alert rules tests. Not installed: no service, no dpkg
# state; the .deb is removed once unpacked. Warm: at once.
#
#   test/bed/fetch-prometheus.sh    # prints the directory holding prometheus and promtool
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
root="$cache/monitoring/prometheus-${PROMETHEUS_DEB_VERSION}"
bin="$root/usr/bin"

log() { printf '[prometheus %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ -f "$root/.complete" ]; then log "warm cache: $bin"; echo "$bin"; exit 0; fi

mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [ -f "$root/.complete" ]; then log "warm cache (fetched by a concurrent run): $bin"; echo "$bin"; exit 0; fi

download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
# apt drops to its _apt user for downloads: the directory must be writable by it.
chmod 0777 "$download"
log "apt-get download prometheus=$PROMETHEUS_DEB_VERSION"
if ! (cd "$download" && apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >&2); then
  log "not in the local package lists; apt-get update, then again"
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then sudo apt-get update -q >&2; else apt-get update -q >&2; fi
  (cd "$download" && apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >&2) || {
    log "bookworm no longer serves prometheus $PROMETHEUS_DEB_VERSION ($(apt-cache policy prometheus | sed -n 's/.*Candidate: //p') is there): update PROMETHEUS_DEB_VERSION in test/bed/versions.env"
    exit 1
  }
fi
dpkg-deb -x "$download"/prometheus_*.deb "$root"
"$bin/promtool" --version >&2
touch "$root/.complete"
log "unpacked prometheus $PROMETHEUS_DEB_VERSION into $root"
echo "$bin"
