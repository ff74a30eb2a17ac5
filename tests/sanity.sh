#!/usr/bin/env bash
# ansible-test sanity, offline. ansible-test wants the collection at a path ending in
# ansible_collections/<namespace>/<name>, and resolves symlinks, so the files git would
# commit are copied to such a path in a fresh temporary directory (inside the repository,
# git would hide them; a fixed path would let two runs clobber each other).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubesched-sanity.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
DEST=$WORK/ansible_collections/kubesched/scheduler
PY=${SANITY_PYTHON:-3.11}
mkdir -p "$DEST" "$HOME/.ansible/test/cache"
cp -n "$ROOT/lab/get_pip_24_2.py" "$HOME/.ansible/test/cache/get_pip_24_2.py" 2>/dev/null || true
cd "$ROOT"
# Tracked files plus new ones that are not ignored: what a commit would carry.
git ls-files -z --cached --others --exclude-standard | grep -zv -e '^collections/' -e '^ansible.cfg$' |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar -c --null -T - -f - | tar -x -C "$DEST" -f -
cd "$DEST"
ansible-test sanity --venv --python "$PY" --color no "$@"
