#!/usr/bin/env bash
# `make test`: lint, sanity, unit, integration against the lab, Molecule. The lab comes up
# first and goes down at the end, also when a step fails. Prints a summary of the stages.
#
# Molecule needs neither the shared lab nor the stages before it (its lanes start private labs
# of their own): it starts first, in the background, its output kept in a log, and is waited for
# in its place in the order; its log is printed then. A stage that fails stops it, unless
# KEEP_GOING=1. Its Ansible controllers run at idle priority (the session's autogroup at nice 19):
# integration's failover and soak checks hold schedulers to the Lease's timings, and on two cores
# three lanes of ansible-playbook at normal priority starve them (a soak smoke beside them once
# took 180 s to restart an API server). Molecule gets the CPU they leave; the lanes' labs and
# containers, started in sessions of their own, keep normal priority.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
STAGES=${TEST_STAGES:-lint sanity unit integration molecule}
MOLECULE_OUT=$ROOT/.cache/molecule.out
started_lab=0
molecule_pid=

# shellcheck disable=SC2317 # called from the EXIT trap
stop_molecule() {
  [ -n "$molecule_pid" ] || return 0
  kill -TERM -- "-$molecule_pid" 2>/dev/null
  wait "$molecule_pid" 2>/dev/null
  molecule_pid=
}
trap 'stop_molecule; [ "$started_lab" = 1 ] && [ "${KEEP_LAB:-0}" != 1 ] && bash lab/lab.sh down' EXIT

if [[ " $STAGES " == *" molecule "* ]]; then
  mkdir -p "$(dirname "$MOLECULE_OUT")"
  molecule_start=$SECONDS
  # shellcheck disable=SC2016 # $$ is the new session's shell
  setsid bash -c 'echo 19 >"/proc/$$/autogroup" 2>/dev/null; exec make --no-print-directory molecule' \
    >"$MOLECULE_OUT" 2>&1 &
  molecule_pid=$!
  echo "==== make molecule started in the background (its output: $MOLECULE_OUT)"
fi

if ! bash lab/lab.sh status >/dev/null 2>&1; then
  bash lab/lab.sh up || exit 1
  started_lab=1
fi

declare -a summary
failed=0
for stage in $STAGES; do
  echo "==== make $stage"
  start=$SECONDS
  if [ "$stage" = molecule ]; then
    wait "$molecule_pid"
    ok=$?
    molecule_pid=
    start=$molecule_start
    cat "$MOLECULE_OUT"
  else
    make --no-print-directory "$stage"
    ok=$?
  fi
  if [ "$ok" = 0 ]; then
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
