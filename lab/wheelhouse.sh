#!/usr/bin/env bash
# The offline bundle for masters that reach no package index (the lab's containers, and
# air-gapped hosts):
#   $KUBESCHED_WHEELHOUSE           kubesched's wheel, built from this checkout, with every
#   (~/.cache/kubesched/wheelhouse)  dependency and setuptools (to rebuild it offline). Give
#                                   each checkout its own (Molecule does): the role packs the
#                                   whole directory into the release, so another checkout's
#                                   build there would change this one's release.
#   ~/.cache/kubesched/debs         python3-cryptography and what it needs from Debian, for
#                                   making keys and CSRs on the masters
# Safe to run again: what is present is kept; prints "fetched" when it had to download.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KUBESCHED_CACHE:-$HOME/.cache/kubesched}
SHARED_WHEELS=$CACHE/wheelhouse
WHEELS=${KUBESCHED_WHEELHOUSE:-$SHARED_WHEELS}
DEBS=$CACHE/debs
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
DEB_PACKAGES=(python3-cryptography python3-cffi-backend)

die() { printf 'wheelhouse: ERROR: %s\n' "$*" >&2; exit 1; }
[ -x "$PYTHON" ] || die "$PYTHON is missing; run 'make setup' first."
mkdir -p "$WHEELS" "$SHARED_WHEELS" "$DEBS"

# Same flags as the scheduler role: a clean copy of the source, offline first, the index
# only for what is missing.
export SOURCE_DATE_EPOCH=315532800
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cp -r "$ROOT/pyproject.toml" "$ROOT/kubesched" "$build"/
for extra in "$ROOT"/README* "$ROOT"/LICENSE*; do [ -e "$extra" ] && cp -r "$extra" "$build"/; done
# The shared wheelhouse is one more offline source of dependencies for a private one.
if ! "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-index --find-links "$WHEELS" \
     --find-links "$SHARED_WHEELS" --wheel-dir "$WHEELS" "$build" pip setuptools 2>/dev/null; then
  "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --find-links "$WHEELS" --find-links "$SHARED_WHEELS" \
    --wheel-dir "$WHEELS" "$build" pip setuptools || die "pip could not build the wheelhouse; is PyPI reachable?"
  echo "wheelhouse: fetched the dependencies into $WHEELS"
fi

missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  compgen -G "$DEBS/${pkg}_*.deb" >/dev/null || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  # A machine that never ran apt-get update has no package lists: refresh them once (as
  # root) rather than fail on the path only a fresh machine takes.
  if ! (cd "$DEBS" && apt-get download -qq "${missing[@]}" 2>/dev/null); then
    [ "$(id -u)" = 0 ] || die "apt-get download ${missing[*]} failed; run 'sudo apt-get update' and retry."
    apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed; check access to the Debian mirror."
    (cd "$DEBS" && apt-get download -qq "${missing[@]}") ||
      die "apt-get download ${missing[*]} failed after apt-get update; check access to the Debian mirror."
  fi
  echo "wheelhouse: fetched ${missing[*]} into $DEBS"
fi
echo "wheelhouse: $(find "$WHEELS" -maxdepth 1 -name '*.whl' | wc -l) wheels in $WHEELS, $(find "$DEBS" -maxdepth 1 -name '*.deb' | wc -l) packages in $DEBS"
