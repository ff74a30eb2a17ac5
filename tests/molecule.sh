#!/usr/bin/env bash
# Run every Molecule scenario in extensions/molecule/, in the order of extensions/molecule/ORDER.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT/extensions/molecule" 2>/dev/null || { echo "molecule: no scenarios in extensions/molecule" >&2; exit 1; }
[ -f ORDER ] || { echo "molecule: extensions/molecule/ORDER lists no scenarios" >&2; exit 1; }
bash "$ROOT/lab/build-image.sh" >/dev/null
cd "$ROOT"
ran=0
while read -r scenario; do
  case "$scenario" in ''|'#'*) continue ;; esac
  echo "---- molecule test -s $scenario"
  start=$SECONDS
  molecule test -s "$scenario"
  echo "---- $scenario passed in $((SECONDS - start)) s"
  ran=$((ran + 1))
done <"$ROOT/extensions/molecule/ORDER"
[ "$ran" -gt 0 ] || { echo "molecule: ORDER names no scenario" >&2; exit 1; }
echo "molecule: $ran scenario(s) passed"
