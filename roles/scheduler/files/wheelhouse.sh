#!/usr/bin/env bash
# Fill a kubesched wheelhouse for the masters' own Pythons and architectures, on a machine
# that reaches a package index (the controller, or any machine that has the collection):
#
#   bash <collection>/roles/scheduler/files/wheelhouse.sh WHEELHOUSE TARGET... [--plugin=PKG]...
#
#   TARGET   python<major>.<minor>-<arch> as a master reports it, e.g. python3.11-x86_64,
#            python3.13-aarch64 (the scheduler role names the target a master lacks).
#   --plugin=PKG  a pip requirement of an out-of-tree plugin package (scheduler_kubesched_plugin_packages).
#
# WHEELHOUSE/kubesched-*.whl is built from the collection's source (KUBESCHED_SOURCE, default
# the collection this script belongs to) when it is missing or the source changed.
# WHEELHOUSE/<target>/ then holds kubesched, every dependency and pip as wheels for that target
# only, at the versions constraints.txt beside this script pins for that target (copied to
# WHEELHOUSE/<target>/constraints.txt, which the role's pip install obeys); manylinux up to
# glibc 2.31, Debian bullseye's, so one target's wheels serve every supported Debian release.
# WHEELHOUSE/<target>/plugins holds the plugins and what they need beyond kubesched.
# Safe to run again: offline first, the index only for what is missing ("fetched" is printed
# then). PYTHON (default python3) is the controller's Python that runs pip.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SOURCE=${KUBESCHED_SOURCE:-$(cd "$HERE/../../.." && pwd)}
PYTHON=${PYTHON:-python3}
CONSTRAINTS=$HERE/constraints.txt
GLIBC_MINOR_MAX=31

die() { printf 'wheelhouse: ERROR: %s\n' "$*" >&2; exit 1; }
usage="usage: wheelhouse.sh WHEELHOUSE TARGET... [--plugin=PKG]... (TARGET like python3.13-x86_64)"

[ $# -ge 2 ] || die "$usage"
wheelhouse=$1
shift
targets=() plugins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --plugin=?*) plugins+=("${1#--plugin=}"); shift ;;
    --plugin) [ $# -ge 2 ] || die "--plugin needs a package; $usage"; plugins+=("$2"); shift 2 ;;
    python[0-9]*.[0-9]*-*) targets+=("$1"); shift ;;
    *) die "'$1' is not a target like python3.13-x86_64; $usage" ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || die "no target given; $usage"
{ [ -f "$SOURCE/pyproject.toml" ] && [ -d "$SOURCE/kubesched" ]; } ||
  die "$SOURCE holds no kubesched source (pyproject.toml, kubesched/); set KUBESCHED_SOURCE to the collection's directory."
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "$PYTHON has no pip; set PYTHON to a Python with pip."

mkdir -p "$wheelhouse"
wheelhouse=$(cd "$wheelhouse" && pwd)
# One filler at a time per wheelhouse: masters of one play, or two checkouts sharing it.
exec 9>"$wheelhouse/.lock"
flock 9

# replace_if_changed NEW DEST: DEST becomes NEW's content, moved in whole, unless it has it already.
replace_if_changed() {
  if cmp -s "$1" "$2"; then rm -f "$1"; else mv -f "$1" "$2"; fi
}
pip() { "$PYTHON" -m pip --disable-pip-version-check --quiet "$@"; }
export SOURCE_DATE_EPOCH=315532800   # the same source gives a byte-identical wheel

# kubesched's own wheel is pure Python: one build serves every target.
fingerprint=$(cd "$SOURCE" && find pyproject.toml kubesched -type f \( -name '*.py' -o -name '*.toml' -o -name '*.typed' \) \
  -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-64)
stamp=$wheelhouse/.kubesched-source
if ! { [ "$(cat "$stamp" 2>/dev/null)" = "$fingerprint" ] && compgen -G "$wheelhouse/kubesched-*.whl" >/dev/null; }; then
  # From a clean copy: setuptools' build/ directory would carry deleted modules over.
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  cp -r "$SOURCE/pyproject.toml" "$SOURCE/kubesched" "$build"/
  for extra in "$SOURCE"/README* "$SOURCE"/LICENSE*; do [ -e "$extra" ] && cp -r "$extra" "$build"/; done
  rm -f "$wheelhouse"/kubesched-*.whl
  pip wheel --no-deps --wheel-dir "$wheelhouse" "$build" || die "building kubesched's wheel from $SOURCE failed (see above)."
  echo "$fingerprint" >"$stamp"
fi
kubesched_wheel=$(compgen -G "$wheelhouse/kubesched-*.whl" | head -n 1)

if [ ${#plugins[@]} -gt 0 ]; then
  # Plugins are built once (their own code is pure Python); their dependencies per target below.
  rm -rf "$wheelhouse/.plugins"
  pip wheel --no-deps --wheel-dir "$wheelhouse/.plugins" "${plugins[@]}" ||
    die "building the plugin packages ${plugins[*]} failed (see above)."
fi

for target in "${targets[@]}"; do
  version=${target#python}
  version=${version%%-*}
  arch=${target#*-}
  abi=cp${version/./}
  platforms=()
  for minor in $(seq 5 "$GLIBC_MINOR_MAX"); do platforms+=(--platform "manylinux_2_${minor}_${arch}"); done
  platforms+=(--platform "manylinux2014_${arch}" --platform "manylinux2010_${arch}" --platform "manylinux1_${arch}")
  # A late patch release: Requires-Python may exclude early ones (cryptography: !=3.9.0,!=3.9.1).
  target_flags=(--only-binary=:all: --implementation cp --python-version "$version.99" --abi "$abi" --abi abi3 --abi none
                "${platforms[@]}")
  dir=$wheelhouse/$target
  mkdir -p "$dir"
  # A file that is already right is left in place, and a new one is moved in whole (from the
  # wheelhouse, so it is not packed half-written): a play packing this target's bundle reads the
  # directory without the lock (a second play, or another Molecule scenario running beside).
  cp "$kubesched_wheel" "$wheelhouse/.new-$target.whl"
  replace_if_changed "$wheelhouse/.new-$target.whl" "$dir/${kubesched_wheel##*/}"
  for wheel in "$dir"/kubesched-*.whl; do
    [ "${wheel##*/}" = "${kubesched_wheel##*/}" ] || rm -f "$wheel"
  done
  # The pins of this target, markers evaluated for it: pip would evaluate them for the Python
  # it runs on, not for --python-version's.
  "$PYTHON" "$HERE/target_constraints.py" "$CONSTRAINTS" "$target" >"$wheelhouse/.new-$target.txt" ||
    die "$CONSTRAINTS has no pins for $target (above); kubesched supports CPython 3.9 to 3.13."
  replace_if_changed "$wheelhouse/.new-$target.txt" "$dir/constraints.txt"
  if ! pip download "${target_flags[@]}" --no-deps --no-index --find-links "$dir" --dest "$dir" -r "$dir/constraints.txt" 2>/dev/null; then
    pip download "${target_flags[@]}" --no-deps --find-links "$dir" --dest "$dir" -r "$dir/constraints.txt" ||
      die "pip could not fetch the wheels $CONSTRAINTS pins for $target (Python $version on $arch); is the package index reachable?"
    echo "wheelhouse: fetched the wheels for $target into $dir"
  fi
  # Wheels of earlier pins would change the bundle (and so the release) without being used.
  for wheel in "$dir"/*.whl; do
    base=${wheel##*/}
    name=${base%%-*}
    rest=${base#*-}
    name=${name,,}
    [ "$name" = kubesched ] || grep -qxF "${name//_/-}==${rest%%-*}" "$dir/constraints.txt" || rm -f "$wheel"
  done
  rm -rf "$dir/plugins"
  if [ ${#plugins[@]} -gt 0 ]; then
    mkdir "$dir/plugins"
    cp "$wheelhouse"/.plugins/*.whl "$dir/plugins"/
    plugin_wheels=("$dir"/plugins/*.whl)
    if ! pip download "${target_flags[@]}" --no-index --find-links "$dir" --find-links "$dir/plugins" --dest "$dir/plugins" \
         -c "$dir/constraints.txt" "${plugin_wheels[@]}" 2>/dev/null; then
      pip download "${target_flags[@]}" --find-links "$dir" --find-links "$dir/plugins" --dest "$dir/plugins" \
        -c "$dir/constraints.txt" "${plugin_wheels[@]}" ||
        die "pip could not fetch the plugins' dependencies for $target (see above)."
      echo "wheelhouse: fetched the plugins' dependencies for $target into $dir/plugins"
    fi
  fi
done
echo "wheelhouse: $wheelhouse holds ${targets[*]}"
