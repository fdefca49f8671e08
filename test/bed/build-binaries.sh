#!/usr/bin/env bash
# Builds the test bed's control-plane binaries from Go modules (see ../shared/reference/test-bed.md)
# into a cache outside the repository, keyed by version. A warm cache skips the build.
#
#   test/bed/build-binaries.sh            # prints the bin directory on its last line
#
# Environment: DRIVER_ROLLOUT_CACHE (default ~/.cache/driver-rollout).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=kubernetes-go-build.sh
source "$here/kubernetes-go-build.sh"

cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
bin="$cache/bin/$key"
work="$cache/build/$key"
tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

log() { printf '[test-bed build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

is_complete() {
  for t in "${tools[@]}"; do [ -x "$bin/$t" ] || return 1; done
  for s in "${kwok_stages[@]}"; do [ -f "$bin/kwok-stages/$(basename "$s")" ] || return 1; done
  [ -f "$bin/.complete" ]
}

# KWOK v0.8.0 has no built-in stages; its module ships them under kustomize/stage/.
# We use its node stages and pod deletion; pod start-up stages are our own (kwok-pod-stages.yaml).
kwok_stages=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-delete.yaml)
copy_kwok_stages() {
  local dir
  dir=$(cd "$work" && GOTOOLCHAIN=local GOFLAGS= go_download_json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$bin/kwok-stages"
  for s in "${kwok_stages[@]}"; do install -m 0644 "$dir/kustomize/stage/$s" "$bin/kwok-stages/"; done
}

if is_complete; then
  log "warm cache: $bin"
  echo "$bin"
  exit 0
fi
if [ -f "$bin/.complete" ] && command -v go >/dev/null; then
  # Binaries are built; only the stage files are missing (an older cache layout).
  mkdir -p "$work"; copy_kwok_stages
  if is_complete; then log "warm cache (stages refreshed): $bin"; echo "$bin"; exit 0; fi
fi

setup_go "the test bed (Kubernetes, etcd, KWOK)"
mkdir -p "$bin" "$work"
# One builder at a time per cache key; a second waits, then finds the cache warm.
exec 9>"$work/.lock"
flock 9
if is_complete; then log "warm cache (built by a concurrent run): $bin"; echo "$bin"; exit 0; fi

started=$SECONDS

# --- Kubernetes: a wrapper module replacing every staging module with its published version.
kmod="$work/kubernetes"
write_kubernetes_wrapper "$kmod" driverrollout.test/kubernetes-build kube-apiserver kube-controller-manager kube-scheduler kubectl
for t in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build_kubernetes_command "$kmod" "$t" "$bin/$t"
done

# --- etcd: the server module's root package is the etcd binary.
emod="$work/etcd"
mkdir -p "$emod"
cat > "$emod/go.mod" <<MOD
module driverrollout.test/etcd-build

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

tool go.etcd.io/etcd/server/v3
MOD
(cd "$emod" && log "go mod tidy for etcd $ETCD_VERSION" && go_downloading mod tidy)
log "building etcd $ETCD_VERSION"
(cd "$emod" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)

# --- KWOK: no replaces, builds as is.
log "building kwok $KWOK_VERSION"
GOBIN="$bin" go_downloading install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
copy_kwok_stages

touch "$bin/.complete"
log "built ${tools[*]} in $((SECONDS - started)) s; cache size $(du -sh "$cache" | cut -f1)"
echo "$bin"
