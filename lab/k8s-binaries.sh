#!/usr/bin/env bash
# Provide kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and kwok at
# pinned versions in a cache outside the repository. Downloads where dl.k8s.io (and GitHub,
# for kwok) answer; otherwise builds them from their Go modules through the Go module proxy
# (k8s.io/kubernetes needs a wrapper module whose replace lines pin its staging modules to
# the published v0.x versions). KUBESCHED_NO_DOWNLOAD=1 skips the download attempts.
#
# Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE_ROOT=${KUBESCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubesched}
BIN_DIR="$CACHE_ROOT/$K8S_VERSION/bin"
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
BINARIES=("${K8S_COMMANDS[@]}" etcd kwok)

# Temporary directories are removed when the script exits, however it exits. (A RETURN
# trap would stay set after its function and fire at a later function's return, where the
# local it names no longer exists: under set -u that aborted a cold run after the build.)
TMP_DIRS=()
cleanup() { [ ${#TMP_DIRS[@]} -eq 0 ] || rm -rf "${TMP_DIRS[@]}"; }
trap cleanup EXIT
# make_tmp VAR: a new temporary directory in VAR (not $(...): a subshell would not record it).
make_tmp() {
  local d
  d=$(mktemp -d "${TMPDIR:-/tmp}/k8s-binaries.XXXXXX")
  TMP_DIRS+=("$d")
  printf -v "$1" '%s' "$d"
}

log() { printf 'k8s-binaries: %s\n' "$*" >&2; }
die() { printf 'k8s-binaries: ERROR: %s\n' "$*" >&2; exit 1; }

have_all() {
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN_DIR/$b" ] || return 1; done
}

try_download() {
  # dl.k8s.io is unreachable in some sandboxes; a user's machine usually reaches it.
  [ "${KUBESCHED_NO_DOWNLOAD:-}" = 1 ] && return 1
  local base tmp b
  base="https://dl.k8s.io/release/$K8S_VERSION/bin/linux/$(go_arch)"
  curl -fsS --max-time 5 -o /dev/null "$base/kubectl.sha256" 2>/dev/null || return 1
  make_tmp tmp
  for b in "${K8S_COMMANDS[@]}"; do
    [ -x "$BIN_DIR/$b" ] && continue
    log "downloading $b $K8S_VERSION"
    curl -fsSL -o "$tmp/$b" "$base/$b" || return 1
    echo "$(curl -fsSL "$base/$b.sha256")  $tmp/$b" | sha256sum -c --quiet - ||
      die "checksum mismatch for $b from $base"
    install -m 0755 "$tmp/$b" "$BIN_DIR/$b"
  done
  # etcd has no dl.k8s.io release; it is always built below when missing.
  return 0
}

try_download_kwok() {
  [ "${KUBESCHED_NO_DOWNLOAD:-}" = 1 ] && return 1
  local url tmp
  url="https://github.com/kubernetes-sigs/kwok/releases/download/$KWOK_VERSION/kwok-linux-$(go_arch)"
  make_tmp tmp
  curl -fsSL --max-time 60 -o "$tmp/kwok" "$url" 2>/dev/null || return 1
  "$tmp/kwok" --version >/dev/null 2>&1 || return 1
  install -m 0755 "$tmp/kwok" "$BIN_DIR/kwok"
}

go_arch() {
  if command -v go >/dev/null 2>&1; then go env GOARCH; return; fi
  case $(uname -m) in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) uname -m ;;
  esac
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
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
}

build_k8s() {
  local work b missing=0
  for b in "${K8S_COMMANDS[@]}"; do [ -x "$BIN_DIR/$b" ] || missing=1; done
  [ "$missing" = 1 ] || return 0
  make_tmp work
  write_k8s_wrapper "$work"
  log "resolving modules for k8s.io/kubernetes $K8S_VERSION"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>"$work/tidy.log") ||
    { cat "$work/tidy.log" >&2; die "go mod tidy failed for the kubernetes wrapper module; see above"; }
  local -a packages=()
  for b in "${K8S_COMMANDS[@]}"; do
    [ -x "$BIN_DIR/$b" ] || packages+=("k8s.io/kubernetes/cmd/$b")
  done
  # One go build for every missing command: Go compiles the packages they share once and
  # links the binaries in parallel, where one build per command leaves cores idle at each
  # build's serial tail.
  log "building ${packages[*]##*/} $K8S_VERSION from Go modules (cold: several minutes)"
  mkdir -p "$work/out"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#v1.} \
      -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" \
      -o "$work/out/" "${packages[@]}") ||
    die "building ${packages[*]##*/} failed (see the Go output above). If a module is missing, check that $K8S_VERSION is a published release."
  for b in "${packages[@]##*/}"; do mv "$work/out/$b" "$BIN_DIR/$b"; done
}

build_etcd() {
  [ -x "$BIN_DIR/etcd" ] && return 0
  local work
  make_tmp work
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

build_kwok() {
  [ -x "$BIN_DIR/kwok" ] && return 0
  local gobin
  make_tmp gobin
  log "building kwok $KWOK_VERSION from Go modules"
  GOBIN=$gobin CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath \
      -ldflags "-s -w" \
      "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" ||
    die "building kwok failed (see the Go output above). Check that $KWOK_VERSION is a release the Go module proxy serves (KWOK_VERSION moves it)."
  install -m 0755 "$gobin/kwok" "$BIN_DIR/kwok"
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
  [ -x "$BIN_DIR/kwok" ] || try_download_kwok || true
  if ! have_all; then
    need_go
    build_k8s
    build_etcd
    build_kwok
  fi
  have_all || die "binaries still missing in $BIN_DIR after build"
  log "ready in $BIN_DIR ($((SECONDS - start)) s, $(du -sh "$CACHE_ROOT/$K8S_VERSION" | cut -f1))"
  echo "$BIN_DIR"
}

main "$@"
