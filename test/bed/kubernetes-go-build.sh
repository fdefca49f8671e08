# Sourced by build-binaries.sh and build-kubelet.sh: how the test bed builds Kubernetes commands
# from Go modules. k8s.io/kubernetes cannot be required as is (its go.mod replaces every staging
# module with ./staging/...), so a wrapper module requires it and replaces each staging module
# with its published v0.x version instead. Needs KUBERNETES_VERSION (versions.env) and a `log`
# function from the caller.

# shellcheck source=go-download.sh
source "$(dirname "${BASH_SOURCE[0]}")/go-download.sh"

# Puts Go on PATH and sets a reproducible build environment; fails naming what is missing.
setup_go() {
  [ -x /usr/local/go/bin/go ] && PATH=$PATH:/usr/local/go/bin
  command -v go >/dev/null || { log "go is not installed; $1 is built from Go modules"; return 1; }
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
}

# write_kubernetes_wrapper <dir> <module name> <command>...: the wrapper module in <dir>, with a
# `tool` line per k8s.io/kubernetes/cmd/<command>, tidied (downloads the modules).
write_kubernetes_wrapper() {
  local dir=$1 name=$2; shift 2
  mkdir -p "$dir"
  log "resolving k8s.io/kubernetes@$KUBERNETES_VERSION"
  local upstream_mod staging_version t
  upstream_mod=$(cd "$dir" && go_download_json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging_version="v0${KUBERNETES_VERSION#v1}"
  {
    echo "module $name"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/').0"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$upstream_mod" \
      | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
    for t in "$@"; do echo "tool k8s.io/kubernetes/cmd/$t"; done
  } > "$dir/go.mod"
  log "wrapper module has $(grep -c '^replace' "$dir/go.mod") staging replaces"
  (cd "$dir" && log "go mod tidy (downloads modules)" && go_downloading mod tidy)
}

# build_kubernetes_command <wrapper dir> <command> <output path>: stripped, with the version
# stamped as a release build stamps it (kubectl version and the API server report it).
build_kubernetes_command() {
  local dir=$1 cmd=$2 out=$3 major minor ldflags="" p
  major=${KUBERNETES_VERSION#v}; major=${major%%.*}
  minor=${KUBERNETES_VERSION#v*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  log "building $cmd $KUBERNETES_VERSION"
  (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out" "k8s.io/kubernetes/cmd/$cmd")
}
