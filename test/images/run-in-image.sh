#!/usr/bin/env bash
# Runs one command in a built image, from its docker-archive tarball (what the real node imports),
# with buildah (no daemon, no network), and exits with the command's exit code. The working
# container is removed afterwards.
#
#   test/images/run-in-image.sh <image.tar> [--user UID] -- <command> [args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=buildah-env.sh
source "$here/buildah-env.sh"
archive=$1; shift
user=()
if [ "${1:-}" = "--user" ]; then user=(--user "$2"); shift 2; fi
[ "${1:-}" = "--" ] && shift
c=$(buildah_ from --quiet --pull-never "docker-archive:$archive" 2>/dev/null || buildah_ from --quiet "docker-archive:$archive")
trap 'buildah_ rm "$c" >/dev/null 2>&1 || true' EXIT
set +e
buildah_ run --network none "${user[@]}" "$c" -- "$@"
code=$?
set -e
exit "$code"
