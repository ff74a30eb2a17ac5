#!/usr/bin/env bash
# The offline bundle for masters that reach no package index (the lab's containers, and
# air-gapped hosts):
#   $KUBESCHED_WHEELHOUSE            kubesched's wheel built from this checkout, and one
#   (~/.cache/kubesched/wheelhouse)   directory per master target (python<minor>-<arch>) with
#                                    kubesched, every dependency and pip as wheels for that
#                                    target (roles/scheduler/files/wheelhouse.sh, the command
#                                    users run). Give each checkout its own (Molecule does): the
#                                    role packs a target's directory into the release.
#   $KUBESCHED_WHEELHOUSE_TARGETS    the targets (default: the test masters' Pythons, Debian
#                                    bullseye's 3.9, bookworm's 3.11 and trixie's 3.13, on this
#                                    machine's arch), at the versions
#                                    roles/scheduler/files/constraints.txt pins
#   ~/.cache/kubesched/debs          python3-cryptography and what it needs from Debian
#   ~/.cache/kubesched/debs-SUITE    bookworm, and from bullseye and trixie, for making keys and
#                                    CSRs on the masters of each release
# Safe to run again: what is present is kept; prints "fetched" when it had to download.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KUBESCHED_CACHE:-$HOME/.cache/kubesched}
WHEELS=${KUBESCHED_WHEELHOUSE:-$CACHE/wheelhouse}
ARCH=$(uname -m)
read -r -a TARGETS <<<"${KUBESCHED_WHEELHOUSE_TARGETS:-python3.9-$ARCH python3.11-$ARCH python3.13-$ARCH}"
DEB_SUITES=(bullseye bookworm trixie)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
# python3-cryptography and the dependencies a minimal master lacks, per release.
declare -A DEB_PACKAGES=([bullseye]="python3-cryptography python3-cffi-backend python3-six"
                         [bookworm]="python3-cryptography python3-cffi-backend"
                         [trixie]="python3-cryptography python3-cffi-backend python3-bcrypt")

die() { printf 'wheelhouse: ERROR: %s\n' "$*" >&2; exit 1; }
[ -x "$PYTHON" ] || die "$PYTHON is missing; run 'make setup' first."

PYTHON=$PYTHON KUBESCHED_SOURCE=$ROOT bash "$ROOT/roles/scheduler/files/wheelhouse.sh" "$WHEELS" "${TARGETS[@]}"

# Another suite's packages come through a private apt state (its own sources list and
# package lists under the cache), so this machine's apt configuration is never touched.
fetch_debs() {
  local suite=$1 dest=$CACHE/debs-$1 apt_dir=$CACHE/apt/$1 missing=() pkg packages
  [ "$suite" != bookworm ] || dest=$CACHE/debs
  read -r -a packages <<<"${DEB_PACKAGES[$suite]}"
  mkdir -p "$dest"
  for pkg in "${packages[@]}"; do
    compgen -G "$dest/${pkg}_*.deb" >/dev/null || missing+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $suite main" >"$apt_dir/sources.list"
  # No installed packages: apt would otherwise pick this machine's version when it is newer
  # than the suite's (bookworm's python3-cryptography over bullseye's) and find no source for it.
  : >"$apt_dir/status"
  local apt_options=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-"
                     -o "Dir::State::lists=$apt_dir/lists" -o "Dir::State::status=$apt_dir/status" -o "Dir::Cache=$apt_dir/cache"
                     -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -o "APT::Architecture=$(dpkg --print-architecture)")
  if ! (cd "$dest" && apt-get "${apt_options[@]}" download -qq "${missing[@]}" 2>/dev/null); then
    apt-get "${apt_options[@]}" update -qq >/dev/null 2>&1 ||
      die "apt-get update for Debian $suite failed; check access to $MIRROR."
    (cd "$dest" && apt-get "${apt_options[@]}" download -qq "${missing[@]}") ||
      die "apt-get download ${missing[*]} from Debian $suite failed; check access to $MIRROR."
  fi
  echo "wheelhouse: fetched ${missing[*]} from Debian $suite into $dest"
}
for suite in "${DEB_SUITES[@]}"; do fetch_debs "$suite"; done
echo "wheelhouse: targets ${TARGETS[*]} in $WHEELS; $(find "$CACHE"/debs* -name '*.deb' | wc -l) Debian packages in $CACHE/debs*"
