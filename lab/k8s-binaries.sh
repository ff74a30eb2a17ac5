#!/usr/bin/env bash
# Provide kube-apiserver, kube-scheduler, kubectl and etcd at pinned versions in a cache
# outside the repository. Downloads where dl.k8s.io answers; otherwise builds them from
# their Go modules through the Go module proxy (k8s.io/kubernetes needs a wrapper module
# whose replace lines pin its staging modules to the published v0.x versions).
#
# Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
CACHE_ROOT=${KUBESCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubesched}
BIN_DIR="$CACHE_ROOT/$K8S_VERSION/bin"
BINARIES=(kube-apiserver kube-scheduler kubectl etcd)

log() { printf 'k8s-binaries: %s\n' "$*" >&2; }
die() { printf 'k8s-binaries: ERROR: %s\n' "$*" >&2; exit 1; }

have_all() {
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN_DIR/$b" ] || return 1; done
}

try_download() {
  # dl.k8s.io is unreachable in some sandboxes; a user's machine usually reaches it.
  [ "${KUBESCHED_NO_DOWNLOAD:-}" = 1 ] && return 1
  local arch base tmp
  arch=$(go env GOARCH 2>/dev/null || echo amd64)
  base="https://dl.k8s.io/release/$K8S_VERSION/bin/linux/$arch"
  curl -fsS --max-time 5 -o /dev/null "$base/kubectl.sha256" 2>/dev/null || return 1
  tmp=$(mktemp -d)
  for b in kube-apiserver kube-scheduler kubectl; do
    log "downloading $b $K8S_VERSION"
    curl -fsSL -o "$tmp/$b" "$base/$b" || { rm -rf "$tmp"; return 1; }
    echo "$(curl -fsSL "$base/$b.sha256")  $tmp/$b" | sha256sum -c --quiet - ||
      { rm -rf "$tmp"; die "checksum mismatch for $b from $base"; }
    install -m 0755 "$tmp/$b" "$BIN_DIR/$b"
  done
  rm -rf "$tmp"
  # etcd has no dl.k8s.io release; it is always built below when missing.
  return 0
}

need_go() {
  command -v go >/dev/null 2>&1 ||
    die "Go is not installed and dl.k8s.io is unreachable. Install Go >= 1.26 (https://go.dev/dl) and run again."
}

# Write a wrapper module that requires $1@$2 with every v0.0.0 staging module replaced by
# the published v0.Y.Z. The list of staging modules is read from the release's own go.mod.
write_k8s_wrapper() {
  local dir=$1 minor gomod
  minor=${K8S_VERSION#v1.}
  local info
  info=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1) || true
  if grep -q '"Error"' <<<"$info" || ! grep -q '"GoMod"' <<<"$info"; then
    die "cannot fetch k8s.io/kubernetes@$K8S_VERSION through the Go module proxy ($(go env GOPROXY)): $(sed -n 's/.*"Error": "\(.*\)",*/\1/p' <<<"$info" | head -1). Check the network path to the proxy, or set K8S_VERSION to a release the proxy serves."
  fi
  gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$info")
  {
    echo "module kubesched.local/k8sbuild"
    echo
    echo "go $(sed -n 's/^go //p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    grep -Eo 'k8s\.io/[a-z0-9.-]+ => \./staging/src/k8s\.io/[a-z0-9.-]+' "$gomod" |
      awk -v m="v0.$minor" '{print "replace " $1 " => " $1 " " m}'
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
}

build_k8s() {
  local work b
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  write_k8s_wrapper "$work"
  log "resolving modules for k8s.io/kubernetes $K8S_VERSION"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>"$work/tidy.log") ||
    { cat "$work/tidy.log" >&2; die "go mod tidy failed for the kubernetes wrapper module; see above"; }
  for b in kube-apiserver kube-scheduler kubectl; do
    [ -x "$BIN_DIR/$b" ] && continue
    log "building $b $K8S_VERSION from Go modules (cold: several minutes)"
    (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
        -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
        -X k8s.io/component-base/version.gitMajor=1 \
        -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#v1.} \
        -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" \
        -o "$BIN_DIR/$b.tmp" "k8s.io/kubernetes/cmd/$b") ||
      die "building $b failed (see the Go output above). If a module is missing, check that $K8S_VERSION is a published release."
    mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b"
  done
}

build_etcd() {
  [ -x "$BIN_DIR/etcd" ] && return 0
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building etcd $ETCD_VERSION from Go modules"
  cat >"$work/go.mod" <<MOD
module kubesched.local/etcdbuild

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>"$work/tidy.log") ||
    { cat "$work/tidy.log" >&2; die "go mod tidy failed for go.etcd.io/etcd/server/v3@$ETCD_VERSION"; }
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd.tmp" go.etcd.io/etcd/server/v3) ||
    die "building etcd failed (see the Go output above)"
  mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
}

main() {
  mkdir -p "$BIN_DIR"
  if have_all; then echo "$BIN_DIR"; return 0; fi
  # One build at a time: a second caller waits for the first and then finds the binaries.
  exec 9>"$CACHE_ROOT/.build.lock"
  if ! flock -n 9; then
    log "another build is running; waiting for it"
    flock 9
  fi
  if have_all; then echo "$BIN_DIR"; return 0; fi
  local start=$SECONDS
  try_download || true
  if ! have_all; then
    need_go
    build_k8s
    build_etcd
  fi
  have_all || die "binaries still missing in $BIN_DIR after build"
  log "ready in $BIN_DIR ($((SECONDS - start)) s, $(du -sh "$CACHE_ROOT/$K8S_VERSION" | cut -f1))"
  echo "$BIN_DIR"
}

main "$@"
