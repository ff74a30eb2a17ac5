#!/usr/bin/env bash
# `make test`: lint, sanity, unit, integration against the lab, Molecule. The lab comes up
# first and goes down at the end, also when a step fails. Prints a summary of the stages.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
STAGES=${TEST_STAGES:-lint sanity unit integration molecule}
started_lab=0

trap '[ "$started_lab" = 1 ] && [ "${KEEP_LAB:-0}" != 1 ] && bash lab/lab.sh down' EXIT

if ! bash lab/lab.sh status >/dev/null 2>&1; then
  bash lab/lab.sh up || exit 1
  started_lab=1
fi

declare -a summary
failed=0
for stage in $STAGES; do
  echo "==== make $stage"
  start=$SECONDS
  if make --no-print-directory "$stage"; then
    summary+=("$stage: ok ($((SECONDS - start)) s)")
  else
    summary+=("$stage: FAILED ($((SECONDS - start)) s)")
    failed=1
    [ "${KEEP_GOING:-0}" = 1 ] || break
  fi
done
echo "==== summary"
printf '  %s\n' "${summary[@]}"
exit $failed
