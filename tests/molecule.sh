#!/usr/bin/env bash
# Run every Molecule scenario in extensions/molecule/ORDER. Each line there is a lane: its
# scenarios run one after another, and the lanes run side by side, each against a private lab
# of its own (lab/lab.sh with its own LAB_DIR and ports), so no lane's scheduler binds another's
# pods or takes its Lease. The scenarios' containers and loopback addresses are distinct across
# lanes. A scenario's output goes to its log under MOLECULE_LOG_DIR (.cache/molecule-logs); the
# log of a scenario that fails is printed at the end. Exits 1 when any scenario failed.
#
# Stopped (SIGTERM or Ctrl-C, as `make test` does when a stage before it fails), it destroys the
# containers of the scenarios it interrupted and takes the lanes' labs down before it exits.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ORDER=$ROOT/extensions/molecule/ORDER
LOGS=${MOLECULE_LOG_DIR:-$ROOT/.cache/molecule-logs}
[ -f "$ORDER" ] || { echo "molecule: $ORDER lists no scenarios" >&2; exit 1; }
cd "$ROOT" || exit 1

lanes=()
while read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  lanes+=("$line")
done <"$ORDER"
[ ${#lanes[@]} -gt 0 ] || { echo "molecule: $ORDER names no scenario" >&2; exit 1; }

# What every lane reads and none should build at the same time as another: the master images and
# the offline bundle (each scenario's prepare finds them present).
bash lab/build-image.sh >/dev/null || exit 1
KUBESCHED_WHEELHOUSE=$ROOT/.cache/wheelhouse bash lab/wheelhouse.sh >/dev/null || exit 1
rm -rf "$LOGS" && mkdir -p "$LOGS"

lane_lab() {  # lane_lab INDEX COMMAND...: the command with lane INDEX's private lab in its environment
  local lane=$1 base=$((6450 + 10 * $1))
  shift
  env LAB_DIR="$ROOT/.lab-molecule-$lane" LAB_API_PORT=$base LAB_ETCD_PORT=$((base + 1)) \
    LAB_ETCD_PEER_PORT=$((base + 2)) "$@"
}

labs_down() {
  local i
  for i in "${!lanes[@]}"; do
    lane_lab "$i" bash lab/lab.sh down >/dev/null 2>&1
  done
}

run_lane() {  # run_lane INDEX SCENARIO...: the lane's lab, then its scenarios in order
  local index=$1 scenario start
  shift
  if ! lane_lab "$index" bash lab/lab.sh up >"$LOGS/lab-$index.log" 2>&1; then
    echo "molecule: lane $index's lab did not start ($LOGS/lab-$index.log)"
    for scenario in "$@"; do echo "$scenario" >"$LOGS/$scenario.failed"; done
    return 1
  fi
  for scenario in "$@"; do
    echo "---- molecule test -s $scenario (lane $index)"
    start=$SECONDS
    if lane_lab "$index" molecule test -s "$scenario" >"$LOGS/$scenario.log" 2>&1; then
      echo "---- $scenario passed in $((SECONDS - start)) s"
    else
      echo "---- $scenario FAILED after $((SECONDS - start)) s"
      echo "$scenario" >"$LOGS/$scenario.failed"
    fi
    touch "$LOGS/$scenario.ended"
  done
}

# shellcheck disable=SC2317 # called from the EXIT trap
destroy_interrupted() {  # a scenario that started and did not end still has its containers
  local i scenario
  for i in "${!lanes[@]}"; do
    for scenario in ${lanes[$i]}; do
      if [ -e "$LOGS/$scenario.log" ] && [ ! -e "$LOGS/$scenario.ended" ]; then
        echo "molecule: destroying the containers of $scenario, interrupted"
        lane_lab "$i" molecule destroy -s "$scenario" >>"$LOGS/$scenario.log" 2>&1 &
      fi
    done
  done
  wait
}

# shellcheck disable=SC2317 # called from the EXIT trap
tree() {  # tree PID: the process and everything it started, parents before their children
  local child
  echo "$1"
  for child in $(pgrep -P "$1"); do tree "$child"; done
}

# shellcheck disable=SC2317 # called from the EXIT trap
stop_lanes() {  # a lane stopped before its scenario, so that it starts no other
  local lane
  for lane in $(jobs -p); do
    # shellcheck disable=SC2046 # one PID per word
    kill $(tree "$lane") 2>/dev/null
  done
  wait
  destroy_interrupted
  labs_down
}

trap stop_lanes EXIT
trap 'exit 130' INT TERM
pids=()
for i in "${!lanes[@]}"; do
  # shellcheck disable=SC2086 # a lane's scenarios are words
  run_lane "$i" ${lanes[$i]} &
  pids+=($!)
done
wait "${pids[@]}"

failed=()
for log in "$LOGS"/*.failed; do
  [ -e "$log" ] && failed+=("$(basename "$log" .failed)")
done
for scenario in "${failed[@]}"; do
  echo "==== molecule test -s $scenario failed; the end of $LOGS/$scenario.log:"
  tail -n 150 "$LOGS/$scenario.log" 2>/dev/null
done
ran=$(find "$LOGS" -name '*.log' ! -name 'lab-*' | wc -l)
if [ ${#failed[@]} -gt 0 ]; then
  echo "molecule: ${#failed[@]} of $ran scenario(s) failed: ${failed[*]}"
  exit 1
fi
echo "molecule: $ran scenario(s) passed in ${#lanes[@]} lanes"
