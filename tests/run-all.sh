#!/usr/bin/env bash
# `make test`: lint, sanity, unit, integration against the lab, Molecule. The lab comes up
# first and goes down at the end, also when a step fails. Prints a summary of the stages.
#
# Molecule needs neither the shared lab nor the stages before it (its lanes start private labs
# of their own): it starts first, in the background, its output kept in a log, and is waited for
# in its place in the order; its log is printed then. A stage that fails stops it, unless
# KEEP_GOING=1; so do Ctrl-C and SIGTERM.
#
# Integration's failover and soak checks hold schedulers to the Lease's timings, and on a small
# machine three Molecule lanes beside them take most of the CPU (on two cores, a soak smoke beside
# them once took over 180 s to restart an API server and failed its Lease-gap checks). Integration
# and the shared lab it uses run in a CPU cgroup of their own with 32 times the default weight,
# where the kernel offers one (cgroup v1's cpu.shares or v2's cpu.weight, as root): they get the
# CPU first, Molecule what they leave. Without one, everything runs at the same weight.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
STAGES=${TEST_STAGES:-lint sanity unit integration molecule}
MOLECULE_OUT=$ROOT/.cache/molecule.out
LAB=${LAB_DIR:-$ROOT/.lab}
started_lab=0
molecule_pid=
priority_cgroup=

# make_priority_cgroup: a CPU cgroup with 32 times the default weight in $priority_cgroup, or false.
make_priority_cgroup() {
  local v1=/sys/fs/cgroup/cpu v2=/sys/fs/cgroup dir
  if [ -f "$v1/cpu.shares" ] && [ -w "$v1" ]; then
    dir=$v1/kubesched-test-$$
    mkdir -p "$dir" 2>/dev/null && echo 32768 >"$dir/cpu.shares" 2>/dev/null || return 1
  elif grep -qw cpu "$v2/cgroup.subtree_control" 2>/dev/null && [ -w "$v2" ]; then
    dir=$v2/kubesched-test-$$
    mkdir -p "$dir" 2>/dev/null && echo 3200 >"$dir/cpu.weight" 2>/dev/null || return 1
  else
    return 1
  fi
  priority_cgroup=$dir
}

# to_priority_cgroup PID...: move processes (with their future children) into it.
to_priority_cgroup() {
  local pid
  [ -n "$priority_cgroup" ] || return 0
  for pid in "$@"; do
    echo "$pid" >"$priority_cgroup/cgroup.procs" 2>/dev/null || true
  done
}

# shellcheck disable=SC2317 # called from the EXIT trap
drop_priority_cgroup() {  # what is still in it (a lab kept up) goes back to the parent
  local pid
  [ -n "$priority_cgroup" ] && [ -d "$priority_cgroup" ] || return 0
  while read -r pid; do
    echo "$pid" >"$(dirname "$priority_cgroup")/cgroup.procs" 2>/dev/null || true
  done <"$priority_cgroup/cgroup.procs"
  rmdir "$priority_cgroup" 2>/dev/null || true
}

# shellcheck disable=SC2317 # called from the EXIT trap
stop_molecule() {  # and wait (up to 5 minutes) until its lanes have destroyed their containers
  local waited=0
  [ -n "$molecule_pid" ] || return 0
  kill -TERM -- "-$molecule_pid" 2>/dev/null
  wait "$molecule_pid" 2>/dev/null
  while kill -0 -- "-$molecule_pid" 2>/dev/null && [ "$waited" -lt 300 ]; do
    sleep 1
    waited=$((waited + 1))
  done
  molecule_pid=
}
trap 'stop_molecule; [ "$started_lab" = 1 ] && [ "${KEEP_LAB:-0}" != 1 ] && bash lab/lab.sh down; drop_priority_cgroup' EXIT
trap 'exit 130' INT TERM

if [[ " $STAGES " == *" molecule "* ]]; then
  mkdir -p "$(dirname "$MOLECULE_OUT")"
  molecule_start=$SECONDS
  setsid make --no-print-directory molecule >"$MOLECULE_OUT" 2>&1 &
  molecule_pid=$!
  echo "==== make molecule started in the background (its output: $MOLECULE_OUT)"
  if make_priority_cgroup; then
    echo "==== integration and the lab run at 32 times Molecule's CPU weight ($priority_cgroup)"
  fi
fi

if ! bash lab/lab.sh status >/dev/null 2>&1; then
  # Started from the cgroup, the lab's daemons are in it; a lab already up is moved there.
  (to_priority_cgroup "$BASHPID"; exec bash lab/lab.sh up) || exit 1
  started_lab=1
else
  # shellcheck disable=SC2046 # one PID per file
  to_priority_cgroup $(cat "$LAB"/*.pid 2>/dev/null)
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
  elif [ "$stage" = integration ]; then
    (to_priority_cgroup "$BASHPID"; exec make --no-print-directory "$stage")
    ok=$?
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
