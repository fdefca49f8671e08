#!/usr/bin/env bash
# Builds one unpacked DKMS source package with the real `dkms`, in private trees, for one kernel;
# never touches /var/lib/dkms, /usr/src or /lib/modules:
#
#   dkms-build.sh <unpacked-package-root> <kernel-release> <output-dir>
#
# <output-dir>/dkms is the dkms tree, <output-dir>/source the source tree; the built modules end
# up in <output-dir>/modules/<module name>.ko (named as modinfo names them, whatever
# DEST_MODULE_NAME renames them to) and <output-dir>/.complete marks a finished build (a second
# call returns at once). dkms's own module signing is off (the agent signs with its own key).
# Prints the modules directory on its last line; time.txt holds /usr/bin/time -v of the build.
set -euo pipefail

root=$1 kernel=$2 out=$3
[ -f "$out/.complete" ] && { echo "$out/modules"; exit 0; }

conf=$(ls "$root"/usr/src/*/dkms.conf)
src=$(dirname "$conf")
name=$(sed -n 's/^PACKAGE_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$conf")
version=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$conf")

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
[ -f "$out/.complete" ] && { echo "$out/modules"; exit 0; }
rm -rf "$out/dkms" "$out/source" "$out/modules"
mkdir -p "$out/dkms" "$out/source"
cp -a "$src" "$out/source/$name-$version"

# An explicit environment: nothing of the caller's leaks into dkms and make.
dkms_() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$out" sign_file=/nonexistent/driver-rollout-no-dkms-signing \
    dkms "$@" --dkmstree "$out/dkms" --sourcetree "$out/source" --installtree "$out/install"
}
started=$(date +%s)
dkms_ add -m "$name" -v "$version" >&2
/usr/bin/time -v -o "$out/time.txt" nice -n 10 env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$out" sign_file=/nonexistent/driver-rollout-no-dkms-signing \
  dkms build -m "$name" -v "$version" -k "$kernel" -j "$(nproc)" --dkmstree "$out/dkms" --sourcetree "$out/source" --installtree "$out/install" >&2
mkdir -p "$out/modules"
for ko in "$out/dkms/$name/$version/$kernel/$(uname -m)/module/"*.ko; do
  cp "$ko" "$out/modules/$(modinfo -F name "$ko").ko"
done
echo "$(( $(date +%s) - started ))" > "$out/wall-seconds"
touch "$out/.complete"
echo "$out/modules"
