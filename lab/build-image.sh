#!/usr/bin/env bash
# Build the container-master base images (Debian with systemd and python3) without a
# registry: debootstrap from Debian's mirror, then `docker import`. One image per Debian
# suite named on the command line (default: all the masters the tests use):
#   bullseye  localhost/kubesched-master:bullseye  Python 3.9
#   bookworm  localhost/kubesched-master:bookworm  Python 3.11
#   trixie    localhost/kubesched-master:trixie    Python 3.13
# Each is rebuilt only when missing (FORCE=1 rebuilds). KUBESCHED_MASTER_IMAGE_REPO changes
# the repository part of the names.
set -euo pipefail
REPO=${KUBESCHED_MASTER_IMAGE_REPO:-localhost/kubesched-master}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUPPORTED=(bullseye bookworm trixie)

die() { printf 'build-image: ERROR: %s\n' "$*" >&2; exit 1; }

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=("${SUPPORTED[@]}")
for suite in "${suites[@]}"; do
  [[ " ${SUPPORTED[*]} " == *" $suite "* ]] || die "unknown Debian suite '$suite'; choose from: ${SUPPORTED[*]}."
done
docker info >/dev/null 2>&1 || die "no Docker engine answers. Run 'make setup' (it installs docker.io and starts dockerd) and try again."

build() {
  local suite=$1 image=$REPO:$1 work
  if [ "${FORCE:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "build-image: $image is present"
    return 0
  fi
  command -v debootstrap >/dev/null 2>&1 || {
    [ "$(id -u)" = 0 ] || die "debootstrap is missing; install it (apt-get install debootstrap) as root."
    { apt-get update -qq && apt-get install -y -q debootstrap; } >/dev/null ||
      die "apt-get install debootstrap failed; check access to the Debian mirror."
  }
  work=$(mktemp -d /tmp/kubesched-image.XXXXXX)
  # shellcheck disable=SC2064  # the directory is this call's own, fixed now
  trap "rm -rf '$work'" EXIT
  echo "build-image: debootstrap $suite into $work (about a minute)"
  # python3-venv: roles install kubesched into a venv; iproute2/procps/curl: health checks.
  debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-apt,systemd,systemd-sysv,dbus,sudo,ca-certificates,iproute2,procps,curl \
    "$suite" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; die "debootstrap $suite failed (log above); check that $MIRROR is reachable."; }
  chroot "$work/rootfs" apt-get clean
  rm -rf "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/usr/share/doc/* "$work"/rootfs/usr/share/man/*
  : >"$work/rootfs/etc/machine-id"   # each container gets its own machine-id at boot
  rm -f "$work/rootfs/etc/resolv.conf" "$work/rootfs/etc/hostname"
  tar -C "$work/rootfs" -c . | docker import -c 'ENV container=docker' -c 'CMD ["/sbin/init"]' - "$image" >/dev/null
  rm -rf "$work"
  trap - EXIT
  echo "build-image: built $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}'))"
}

for suite in "${suites[@]}"; do build "$suite"; done
