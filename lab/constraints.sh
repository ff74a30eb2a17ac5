#!/usr/bin/env bash
# Pin kubesched's dependencies for every Python a master may have (requires-python: 3.9 to
# 3.13) in one file with markers, roles/scheduler/files/constraints.txt, which the wheelhouse
# (roles/scheduler/files/wheelhouse.sh) downloads and the scheduler role's pip install obeys:
#   bash lab/constraints.sh            rewrite it from pyproject.toml (newest that fit)
# Wheels only (masters build nothing), resolved by uv for all Pythons at once (pip resolves for
# the Python it runs on), from 3.9.2 (Debian bullseye's; cryptography skips 3.9.0 and 3.9.1). cel-python stays at 0.4.0, the newest that supports 3.9, on 3.10 too,
# so the one cel-python the development venv tests is the one every master without
# cel-expr-python runs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UV=${UV:-$ROOT/.venv/bin/uv}
OUT=$ROOT/roles/scheduler/files/constraints.txt

die() { printf 'constraints: ERROR: %s\n' "$*" >&2; exit 1; }
[ -x "$UV" ] || die "$UV is missing; run 'make setup' (requirements.txt installs uv) or set UV=/path/to/uv."

extra=$(mktemp)
trap 'rm -f "$extra" "$extra.log"' EXIT
# pip itself goes into every target's bundle (the venv is made without ensurepip).
printf 'pip\ncel-python==0.4.0 ; python_version < "3.11"\n' >"$extra"
{
  echo "# kubesched's dependencies, pinned for CPython 3.9 to 3.13 on Linux (x86_64, aarch64)."
  echo "# Written by lab/constraints.sh from pyproject.toml; do not edit by hand."
  (cd "$ROOT" && "$UV" pip compile pyproject.toml "$extra" --universal --python-version 3.9.2 \
    --only-binary :all: --no-header --no-annotate 2>"$extra.log") || { cat "$extra.log" >&2; die "uv could not resolve (above)."; }
} >"$OUT.new"
mv "$OUT.new" "$OUT"
echo "constraints: wrote $OUT ($(grep -c '==' "$OUT") pins)"
