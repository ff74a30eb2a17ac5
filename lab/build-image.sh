#!/usr/bin/env bash
# Build the container-master base image (Debian bookworm with systemd and python3) without a
# registry: debootstrap from Debian's mirror, then `docker import`. Rebuilt only when missing
# (FORCE=1 rebuilds).
set -euo pipefail
IMAGE=${KUBESCHED_MASTER_IMAGE:-localhost/kubesched-master:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() { printf 'build-image: ERROR: %s\n' "$*" >&2; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker engine answers. Run 'make setup' (it installs docker.io and starts dockerd) and try again."
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "build-image: $IMAGE is present"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || {
  [ "$(id -u)" = 0 ] || die "debootstrap is missing; install it (apt-get install debootstrap) as root."
  { apt-get update -qq && apt-get install -y -q debootstrap; } >/dev/null ||
    die "apt-get install debootstrap failed; check access to the Debian mirror."
}
work=$(mktemp -d /tmp/kubesched-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "build-image: debootstrap bookworm into $work (about a minute)"
# python3-venv: roles install kubesched into a venv; iproute2/procps/curl: health checks.
debootstrap --variant=minbase \
  --include=python3,python3-venv,python3-apt,systemd,systemd-sysv,dbus,sudo,ca-certificates,iproute2,procps,curl \
  bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log above); check that $MIRROR is reachable."; }
chroot "$work/rootfs" apt-get clean
rm -rf "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/usr/share/doc/* "$work"/rootfs/usr/share/man/*
: >"$work/rootfs/etc/machine-id"   # each container gets its own machine-id at boot
rm -f "$work/rootfs/etc/resolv.conf" "$work/rootfs/etc/hostname"
tar -C "$work/rootfs" -c . | docker import -c 'ENV container=docker' -c 'CMD ["/sbin/init"]' - "$IMAGE" >/dev/null
echo "build-image: built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
