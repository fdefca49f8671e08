#!/usr/bin/env bash
# Builds the project's images with buildah (no daemon) from Dockerfile.agent and Dockerfile.init
# unchanged, on the locally made base (build-base.sh), plus the pod sandbox ("pause") image the
# real node's containerd needs, and exports each as a docker-archive tarball that
# `ctr images import` loads. The tarballs are cached outside the repository under a hash of
# the images' inputs (Dockerfiles, .dockerignore, package*.json and the copied sources), so a
# warm run rebuilds nothing.
#
#   test/images/build-images.sh        # prints the directory holding agent.tar, init.tar, pause.tar
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=buildah-env.sh
source "$here/buildah-env.sh"
# shellcheck source=../bed/versions.env
source "$repo/test/bed/versions.env"

version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo/package.json" | head -1)
inputs_hash() {
  (cd "$repo" && {
    { printf '%s\n' Dockerfile.agent Dockerfile.init .dockerignore package.json package-lock.json
      find shared agent coordinator init-container -type f -not -path '*/node_modules/*' | LC_ALL=C sort
    } | xargs sha256sum
    printf 'version %s\nbase %s\nscript %s\n' "$version" "$(cat "$here/base.env")" "$(cat "$here/build-images.sh" "$here/build-base.sh" | sha256sum)"
  }) | sha256sum | cut -c1-16
}
hash=$(inputs_hash)
out="$images_cache/out/$hash"
if [ -f "$out/.complete" ]; then touch "$out/.complete"; log "warm images: $out"; echo "$out"; exit 0; fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -f "$out/.complete" ]; then log "warm images (built by a concurrent run): $out"; echo "$out"; exit 0; fi

started=$SECONDS
bash "$here/build-base.sh" >/dev/null
log "base ready after $((SECONDS - started)) s"

# npm in RUN reaches the registry through this machine's TLS setup: its CA bundle and an npmrc
# naming it are mounted for the build only (nothing of them stays in a layer).
ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
printf 'cafile=/run/host-ca/ca-certificates.crt\n' > "$images_cache/build-npmrc"
build() { # name dockerfile
  local t0=$SECONDS
  buildah_ bud --pull=never --network host --layers --quiet \
    -v "$ca:/run/host-ca/ca-certificates.crt:ro" -v "$images_cache/build-npmrc:/usr/local/etc/npmrc:ro" \
    -f "$repo/$2" -t "driver-rollout/$1:$version" "$repo" >&2
  buildah_ push --quiet "driver-rollout/$1:$version" "docker-archive:$out/$1.tar.part:docker.io/driver-rollout/$1:$version" >&2
  mv "$out/$1.tar.part" "$out/$1.tar"
  log "built driver-rollout/$1:$version in $((SECONDS - t0)) s ($(buildah_ images --format '{{.Size}}' "driver-rollout/$1:$version"))"
}
build init-container Dockerfile.init
build agent Dockerfile.agent

# The sandbox image: pause.c from the kubernetes module the kubelet is built from, static.
pause_version=3.10.2
pause_src=$(cd "$repo" && GOTOOLCHAIN=local GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" 2>/dev/null | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
gcc -Os -static -DVERSION="v$pause_version" -o "$out/pause" "$pause_src/build/pause/linux/pause.c"
c=$(buildah_ from scratch)
buildah_ copy "$c" "$out/pause" /pause >/dev/null
buildah_ config --entrypoint '["/pause"]' --user 65535:65535 "$c"
buildah_ commit --quiet --rm "$c" "driver-rollout.test/pause:$pause_version" >/dev/null
buildah_ push --quiet "driver-rollout.test/pause:$pause_version" "docker-archive:$out/pause.tar:driver-rollout.test/pause:$pause_version" >&2
rm -f "$out/pause"
printf 'agent=docker.io/driver-rollout/agent:%s\ninit=docker.io/driver-rollout/init-container:%s\npause=driver-rollout.test/pause:%s\n' \
  "$version" "$version" "$pause_version" > "$out/images.env"
touch "$out/.complete"
# Keep this build and the one before it; older tarballs (1.1 GB each) go once no run has used
# them for 3 hours (a warm hit touches .complete): runs of other trees may still be reading them.
for old in $(ls -1td "$images_cache"/out/*/.complete 2>/dev/null | tail -n +3); do
  [ -n "$(find "$old" -mmin +180)" ] && rm -rf "$(dirname "$old")"
done
find "$images_cache/out" -mindepth 1 -maxdepth 1 -type d -mmin +120 ! -exec test -e '{}/.complete' \; -exec rm -rf {} + 2>/dev/null || true
# Dangling images are also buildah's --layers cache (the deps stages' npm ci, the agent's apt layer):
# pruning them after every build made each source change run npm ci and apt again (~100 s). Prune
# only when the storage has grown past 4 GiB.
if [ "$(du -s --block-size=1M "$images_cache/storage" | cut -f1)" -gt 4096 ]; then buildah_ rmi --prune >/dev/null 2>&1 || true; fi
log "images built in $((SECONDS - started)) s: $out"
echo "$out"
