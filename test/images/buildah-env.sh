# Sourced by the image scripts: one private containers-storage under the cache (never the
# machine's /var/lib/containers), runc as the OCI runtime (Debian's crun cannot run on this
# cgroup v1 hybrid host), and the cache layout:
#   $images_cache/storage       containers-storage (overlay), shared by every run on this machine
#   $images_cache/base/<key>/   mmdebstrap rootfs and npm tarballs of the base image
#   $images_cache/out/<hash>/   docker-archive tarballs of the built images, keyed by their inputs
# shellcheck shell=bash
cache=${DRIVER_ROLLOUT_CACHE:-$HOME/.cache/driver-rollout}
images_cache="$cache/images"
mkdir -p "$images_cache/storage" "$images_cache/run"
cat > "$images_cache/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$images_cache/storage"
runroot = "$images_cache/run"
CONF
export CONTAINERS_STORAGE_CONF="$images_cache/storage.conf"
BUILDAH_RUNTIME=$(command -v runc)
export BUILDAH_RUNTIME
export BUILDAH_ISOLATION=oci
buildah_() { buildah "$@"; }
# The one base of both Dockerfiles: its FROM name, e.g. node:24.21.0-bookworm-slim.
dockerfile_base() {
  sed -n 's/^FROM \([^ ]*\).*/\1/p' "$1" | grep -v '^scratch$' | sort -u
}
log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
