# Sourced by the test bed's build scripts: Go module downloads that survive a transient failure
# of the module proxy (a cold build here failed on a TLS handshake timeout to proxy.golang.org)
# and say why they failed (`go mod download -json` reports its error inside the JSON, which the
# callers' sed filters dropped, so the build ended with exit 1 and no message). Needs a `log`
# function from the caller.

# How many times a download is tried, and the pause before the next try (times the attempt).
GO_DOWNLOAD_ATTEMPTS=3
GO_DOWNLOAD_PAUSE_SECONDS=15

# go_download_json <module@version>: `go mod download -json`'s output; each failed try is logged
# with the proxy's error.
go_download_json() {
  retrying_download download_json_once "$1"
}

# go_downloading <go arguments...>: a go command that downloads modules (mod tidy, install); go
# prints its own errors.
go_downloading() {
  retrying_download go "$@"
}

download_json_once() {
  local json
  if json=$(go mod download -json "$1"); then
    printf '%s\n' "$json"
    return 0
  fi
  log "go mod download $1: $(printf '%s' "$json" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p')"
  return 1
}

# retrying_download <command...>: the command, tried GO_DOWNLOAD_ATTEMPTS times with growing pauses.
retrying_download() {
  local attempt
  for ((attempt = 1; attempt <= GO_DOWNLOAD_ATTEMPTS; attempt++)); do
    "$@" && return 0
    log "$1 ${2:-} failed (try $attempt of $GO_DOWNLOAD_ATTEMPTS)"
    ((attempt < GO_DOWNLOAD_ATTEMPTS)) && sleep $((attempt * GO_DOWNLOAD_PAUSE_SECONDS))
  done
  return 1
}
