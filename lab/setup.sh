#!/usr/bin/env bash
# One-command setup, idempotent and quick when nothing changed:
#   the .venv with the Python dependencies and kubesched, the collection visible to Ansible,
#   a Docker engine, the container-master base image and the Kubernetes binaries.
# Each step can be run alone: setup.sh tools|venv|collection|docker|image|binaries|all
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/.venv
PYTHON=${PYTHON:-}

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

find_python() {
  local candidate
  for candidate in "$PYTHON" python3.11 python3.12 python3.13 python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  die "no Python 3.11-3.13 found (ansible-core 2.19 needs one). Install python3.11 or set PYTHON=/path/to/python3.11."
}

step_venv() {
  local stamp=$VENV/.kubesched-stamp want
  want=$(cat "$ROOT/requirements.txt" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  local py
  py=$(find_python)
  [ -x "$VENV/bin/python" ] || { log "creating $VENV with $py"; "$py" -m venv "$VENV"; }
  log "installing Python dependencies into .venv (first time: a few minutes)"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null ||
    die "pip could not reach the package index; check network access to PyPI (pip config list)."
  "$VENV/bin/pip" install -q -r "$ROOT/requirements.txt" ||
    die "pip install -r requirements.txt failed (see above); check network access to PyPI."
  "$VENV/bin/pip" install -q -e "$ROOT" || die "installing kubesched from $ROOT failed (see above)."
  echo "$want" >"$stamp"
}

step_tools() {
  # openssl and ss for the lab, debootstrap for the image, shellcheck for sanity.
  local missing=() tool
  for tool in openssl ss curl debootstrap shellcheck flock; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing tools: ${missing[*]}. Install them: sudo apt-get install openssl iproute2 curl debootstrap shellcheck util-linux"
  log "installing ${missing[*]} from apt"
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl iproute2 curl debootstrap shellcheck util-linux) \
    >/tmp/kubesched-apt.log 2>&1 || { tail -20 /tmp/kubesched-apt.log >&2; die "apt-get install failed (log above); check access to the Debian mirror."; }
}

step_collection() {
  # Ansible finds kubesched.scheduler through the committed link
  # collections/ansible_collections/kubesched/scheduler (ANSIBLE_COLLECTIONS_PATH=$ROOT/collections).
  # Older setups made a second, ignored link at the top; it would be a second copy of the
  # collection for every tool that walks the tree.
  if [ -L "$ROOT/ansible_collections/kubesched/scheduler" ]; then
    rm "$ROOT/ansible_collections/kubesched/scheduler"
    rmdir "$ROOT/ansible_collections/kubesched" "$ROOT/ansible_collections" 2>/dev/null || true
  fi
  # ansible-test sanity --venv needs get-pip, which it would download from a host that may
  # be unreachable; the pinned copy in lab/ is the one it expects.
  mkdir -p "$HOME/.ansible/test/cache"
  cp -n "$ROOT/lab/get_pip_24_2.py" "$HOME/.ansible/test/cache/get_pip_24_2.py" 2>/dev/null || true
}

pid_file_is_stale() {
  # A pid file is stale when nothing runs under its pid, or when the pid was reused by a
  # process that is not the one named (its /proc/PID/comm).
  local file=$1 name=$2 pid
  [ -f "$file" ] || return 1
  pid=$(cat "$file" 2>/dev/null)
  [ -n "$pid" ] || return 0
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$name" ]
}

clear_stale_docker_pids() {
  # A dockerd killed with its session leaves its pid files behind. dockerd then trusts
  # containerd.pid, waits for a containerd that is some other process (the pid was reused)
  # and gives up ("timeout waiting for containerd to start").
  local file
  for file in /var/run/docker/containerd/containerd.pid:containerd /var/run/docker.pid:dockerd; do
    if pid_file_is_stale "${file%%:*}" "${file##*:}"; then
      log "removing the stale pid file ${file%%:*} (a dockerd that ended without cleaning up)"
      rm -f "${file%%:*}"
    fi
  done
}

step_docker() {
  docker info >/dev/null 2>&1 && return 0
  if ! command -v dockerd >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "no Docker engine. Install docker.io (sudo apt-get install docker.io) and start it (sudo systemctl start docker), then run 'make setup' again."
    log "installing docker.io from apt"
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io) >/tmp/kubesched-apt.log 2>&1 ||
      { tail -20 /tmp/kubesched-apt.log >&2; die "apt-get install docker.io failed (log above); check access to the Debian mirror."; }
  fi
  if ! docker info >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "the Docker engine is installed but not running; start it (sudo systemctl start docker) and run again."
    if command -v systemctl >/dev/null 2>&1 && systemctl start docker 2>/dev/null; then :; else
      clear_stale_docker_pids
      log "starting dockerd in the background (log /var/log/kubesched-dockerd.log)"
      setsid dockerd >/var/log/kubesched-dockerd.log 2>&1 </dev/null &
    fi
    for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
    tail -5 /var/log/kubesched-dockerd.log >&2 || true
    die "dockerd did not come up within 60 s; see /var/log/kubesched-dockerd.log"
  fi
}

step_image() { bash "$ROOT/lab/build-image.sh" >&2; }

step_binaries() { bash "$ROOT/lab/k8s-binaries.sh" >/dev/null; }

# Sourced (the unit tests call its functions): define them and stop here.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case "${1:-all}" in
  venv) step_venv ;;
  collection) step_collection ;;
  docker) step_docker ;;
  image) step_docker; step_image ;;
  binaries) step_binaries ;;
  tools) step_tools ;;
  all)
    step_tools
    # The Go build of the Kubernetes binaries is most of a cold setup and needs only Go: it
    # runs while the venv, Docker and the image (mostly downloads and dpkg) are set up.
    step_binaries & binaries_pid=$!
    trap 'kill "$binaries_pid" 2>/dev/null || true' EXIT
    step_venv; step_collection; step_docker; step_image
    trap - EXIT
    wait "$binaries_pid" || die "building or fetching the Kubernetes binaries failed (see above)"
    ;;
  *) die "unknown step '$1' (tools, venv, collection, docker, image, binaries, all)" ;;
esac
