#!/usr/bin/env bash
# The driver images (drivers/build-driver-images.ts, every flavour of drivers/flavours.ts) for the
# test bed, FROM the agent image that test/images/build-images.sh made, exported as
# docker-archive tarballs and cached outside the repository under a hash of their inputs (the
# agent image's inputs, drivers/, the vendor packages script): a warm run rebuilds nothing, and
# the prebuilt modules come from the vendor module cache, so an image rebuild compiles nothing
# that was compiled before.
#
#   test/images/build-driver-images.sh        # prints the directory holding <flavour>.tar and images.env
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=buildah-env.sh
source "$here/buildah-env.sh"

agent_out=$(bash "$here/build-images.sh" | tail -1)
hash=$( { basename "$agent_out"; cd "$repo" && find drivers scripts/ensure-vendor-packages.sh "$here/build-driver-images.sh" -type f | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)
out="$images_cache/drivers/$hash"
if [ -f "$out/.complete" ]; then touch "$out/.complete"; log "warm driver images: $out"; echo "$out"; exit 0; fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -f "$out/.complete" ]; then log "warm driver images (built by a concurrent run): $out"; echo "$out"; exit 0; fi

started=$SECONDS
# Node 24 from the repository's devDependencies (the machine's node may be older).
node=$repo/node_modules/.bin/node
[ -x "$node" ] || node=node
(cd "$repo" && "$node" drivers/build-driver-images.ts --agent-image "docker-archive:$agent_out/agent.tar" --archive-dir "$out") \
  | while read -r flavour reference archive; do printf '%s=%s %s\n' "$flavour" "$reference" "$archive"; done > "$out/images.env"
touch "$out/.complete"
# Keep this build and the one before it (each flavour's archive carries the agent image too);
# older ones go once no run has used them for 3 hours (a warm hit touches .complete).
for old in $(ls -1td "$images_cache"/drivers/*/.complete 2>/dev/null | tail -n +3); do
  [ -n "$(find "$old" -mmin +180)" ] && rm -rf "$(dirname "$old")"
done
log "driver images built in $((SECONDS - started)) s: $out"
echo "$out"
