#!/usr/bin/env bash
# A/B of the scheduling cycle in instructions, not seconds: callgrind counts the instructions
# a micro-benchmark executes, which another process on the machine does not change, so two
# commits can be compared on a busy machine. Not a test.
#
#   tests/bench/micro/callgrind_ab.sh BEFORE_REV AFTER_REV [workload ...]
#
# Workloads: basic, affinity, spread (micro/schedule_one.py, 500 nodes) and dra
# (micro/dra.py, 100 nodes); basic:GenericWorkload=true and the like run schedule_one.py's
# workload with those feature gates (what pods of no group pay for a gate). Each revision is checked out into a temporary worktree and run
# with this checkout's .venv, at two pod counts; the difference divided by the extra pods is
# the instructions per scheduled pod, start-up and warm-up cancelled out. PYTHONHASHSEED is
# fixed so that two runs of one revision execute the same instructions.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
PY=$ROOT/.venv/bin/python
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_REV AFTER_REV [basic|affinity|spread|dra[:GATES] ...]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
before=$1 after=$2
shift 2
if [ $# -gt 0 ]; then workloads=("$@"); else workloads=(basic affinity dra); fi
FEW=${AB_FEW_PODS:-100} MANY=${AB_MANY_PODS:-300}

work=$(mktemp -d)
cleanup() {
  local tree
  for tree in "$work"/rev-*; do git -C "$ROOT" worktree remove --force "$tree" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

instructions() {  # tree workload pods -> total instructions (Ir)
  local tree=$1 workload=${2%%:*} pods=$3 out=$work/callgrind.out
  local -a cmd
  if [ "$workload" = dra ]; then
    cmd=(tests/bench/micro/dra.py --nodes 100 --pods "$pods" --warmup 20)
  else
    cmd=(tests/bench/micro/schedule_one.py --nodes 500 --pods "$pods" --warmup 20 --workload "$workload")
  fi
  [[ $2 != *:* ]] || cmd+=(--feature-gates "${2#*:}")
  (cd "$tree" && PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file="$out" \
     "$PY" "${cmd[@]}" >/dev/null 2>"$work/valgrind.log") \
    || { cat "$work/valgrind.log" >&2; exit 1; }
  awk '$1 == "summary:" {print $2}' "$out"
}

printf '%-28s %-12s %14s\n' workload revision instr/pod
side=0
for rev in "$before" "$after"; do
  side=$((side + 1))
  tree=$work/rev-$side
  git -C "$ROOT" worktree add -q --detach "$tree" "$rev"
  for workload in "${workloads[@]}"; do
    few=$(instructions "$tree" "$workload" "$FEW")
    many=$(instructions "$tree" "$workload" "$MANY")
    printf '%-28s %-12s %14d\n' "$workload" "$(git -C "$ROOT" rev-parse --short "$rev")" \
      $(((many - few) / (MANY - FEW)))
  done
done
