#!/usr/bin/env bash
# The main job on the local lab (make demo / make demo-down):
#   demo.sh up     kwok nodes, 3 container masters, site.yml for the default scheduler and for
#                  my-scheduler, workloads (not-ready node, dedicated nodes, preemption,
#                  the second scheduler), a Deployment and a DaemonSet, and a table of where each pod landed,
#                  whether it runs, and why; then a GPU workload (S11, lab/demo_gpu.py) and the device
#                  each of its pods got; a what-if of a scoring change, and the role's gate refusing
#                  a configuration that strands pods (site.yml --check); then a gang of four GPU
#                  workers (lab/demo_gang.py) that waits for a fourth GPU node. Safe to run again.
#   demo.sh down   remove the containers and every demo object from the lab API server.
# Needs the lab API server (make lab-up), Docker and the base image (make setup).
# A private lab is chosen as for lab/lab.sh, and the inventory follows it: LAB_DIR (default
# .lab), LAB_API_PORT (default 6443), LAB_ETCD_PORT, LAB_ETCD_PEER_PORT, LAB_KCM_PORT,
# LAB_KWOK_PORT. KUBESCHED_CACHE
# (default ~/.cache/kubesched) holds the masters' offline bundle.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/.venv
export LAB_DIR=${LAB_DIR:-$ROOT/.lab}
export KUBESCHED_CACHE=${KUBESCHED_CACHE:-$HOME/.cache/kubesched}
LAB=$LAB_DIR
KUBECONFIG_ADMIN=$LAB/admin.kubeconfig
IMAGE=${KUBESCHED_MASTER_IMAGE:-localhost/kubesched-master:bookworm}
MASTERS=(master1 master2 master3)
CONTAINER_PREFIX=kubesched-demo-
# The hosts file, not the directory: inventories/lab/my-scheduler.yml is a vars file, which
# the directory's YAML inventory plugin would try to read as groups. group_vars/ still apply.
INVENTORY=$ROOT/inventories/lab/hosts.yml

export PATH=$VENV/bin:$PATH
# This checkout as kubesched.scheduler; the venv's ansible finds community.* and kubernetes.core
# on its own sys.path (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH at its default, true).
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$ROOT/collections}
export PYTHONPATH=$ROOT
export ANSIBLE_FORCE_COLOR=${ANSIBLE_FORCE_COLOR:-0}

# The lab variables that differ from the defaults, as a prefix for the commands we suggest.
lab_env() {
  local var prefix=""
  [ "$LAB_DIR" = "$ROOT/.lab" ] || prefix+="LAB_DIR=$LAB_DIR "
  for var in LAB_API_PORT LAB_ETCD_PORT LAB_ETCD_PEER_PORT LAB_KCM_PORT LAB_KWOK_PORT KUBESCHED_CACHE; do
    if [ -n "${!var:-}" ] && { [ "$var" != KUBESCHED_CACHE ] || [ "${!var}" != "$HOME/.cache/kubesched" ]; }; then
      prefix+="$var=${!var} "
    fi
  done
  printf '%s' "$prefix"
}

log() { printf '\ndemo: %s\n' "$*"; }
die() { printf 'demo: ERROR: %s\n' "$*" >&2; exit 1; }
demo_py() { "$VENV/bin/python" "$ROOT/lab/demo.py" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
demo_gpu() { "$VENV/bin/python" "$ROOT/lab/demo_gpu.py" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
demo_gang() { "$VENV/bin/python" "$ROOT/lab/demo_gang.py" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# S11: GPUs published by the fake DRA driver on two of the nodes, a Deployment whose pods each
# get a GPU through a ResourceClaimTemplate, and which device each pod's claim got.
gpu_workload() {
  log "S11: the fake DRA driver publishes GPUs on demo-node-1 and demo-node-2; a Deployment asks for one GPU per pod"
  demo_gpu up
  demo_gpu wait || true
  log "which GPU each pod got (from its claim's status.allocation)"
  demo_gpu table
}

# The what-if (docs/whatif.md): a scoring change previewed on the cluster's own pods before it
# ships, with kubesched on a master; then the scheduler role's gate refusing a configuration
# that would strand pods, before any master changes.
WHATIF_NEW=/root/whatif-most-allocated.yaml
whatif_preview() {
  local master=${CONTAINER_PREFIX}master1 dir=/etc/kubesched/kube-scheduler rc=0
  log "what-if: the default profile bin-packs (NodeResourcesFit MostAllocated, nvidia.com/gpu weighted 3); where would the cluster's pods go?"
  docker exec -i "$master" sh -c "cat >$WHATIF_NEW" <<'YAML'
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}, {name: nvidia.com/gpu, weight: 3}]
YAML
  echo "\$ docker exec $master kubesched whatif --config $WHATIF_NEW --current $dir/config.yaml --kubeconfig $dir/kubeconfig"
  docker exec "$master" kubesched whatif --config "$WHATIF_NEW" --current "$dir/config.yaml" --kubeconfig "$dir/kubeconfig" || rc=$?
  # 3 and 4 are verdicts (pods stranded, too many moves), not failures of the command.
  case $rc in 0|3|4) ;; *) die "kubesched whatif failed (exit $rc); its message is above." ;; esac

  log "the role's gate: site.yml --check with a NodeAffinity rule no node meets (inventories/lab/whatif-stranding.yml)"
  local output=$LAB/demo-whatif-gate.log
  if ansible-playbook -i "$INVENTORY" "$ROOT/playbooks/site.yml" --check -e @"$ROOT/inventories/lab/whatif-stranding.yml" \
       >"$output" 2>&1; then
    die "site.yml accepted a configuration that strands the cluster's pods; its output is in $output"
  fi
  grep -o 'The new scheduler configuration is refused before any master changes: [^"]*' "$output" | head -n 1 | fold -s -w 100 ||
    die "site.yml failed, but not at the what-if gate; its output is in $output"
  echo "(site.yml stopped there: no master changed; the whole run is in $output)"
}

# Gang scheduling (docs/gang.md): the lab serves PodGroups (make demo starts it with the
# GenericWorkload gate) and the masters' schedulers run with it (inventories/lab group_vars).
gang_workload() {
  local rc=0
  log "gang: PodGroup trainer wants its 4 GPU workers placed together (minCount 4); only 3 GPU nodes exist"
  demo_gang up || rc=$?
  [ "$rc" != 2 ] || return 0  # the lab was started without the gate: said so, nothing to show
  [ "$rc" = 0 ] || return "$rc"
  demo_gang waiting || return 1
  log "gang: a fourth GPU node joins; the group is placed at once, all four together"
  demo_gang add-node || return 1
  demo_gang started
}

preflight() {
  [ -x "$VENV/bin/ansible-playbook" ] || die "the venv is missing; run 'make setup'."
  if ! { [ -s "$KUBECONFIG_ADMIN" ] && bash "$ROOT/lab/lab.sh" status >/dev/null 2>&1; }; then
    die "the lab API server is not running; run 'make lab-up' (make demo does it for you)."
  fi
  docker info >/dev/null 2>&1 || die "no Docker engine answers; run 'make setup'."
}

# The same settings as the Molecule scenarios (extensions/molecule/*/molecule.yml).
start_master() {
  local name=$1 container=$CONTAINER_PREFIX$1
  if [ "$(docker inspect -f '{{.State.Running}}' "$container" 2>/dev/null)" = true ]; then
    return
  fi
  docker rm -f "$container" >/dev/null 2>&1 || true
  docker run -d --name "$container" --hostname "demo-$name" --network host \
    --cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --cgroupns host -v /sys/fs/cgroup/unified:/sys/fs/cgroup:rw \
    --tmpfs /run --tmpfs /run/lock --tmpfs /tmp --stop-signal RTMIN+3 \
    --label kubesched.io/demo=true "$IMAGE" /sbin/init >/dev/null
}

# The masters cannot reach a package mirror: python3-cryptography comes from the controller.
install_offline_packages() {
  local container=$CONTAINER_PREFIX$1
  docker exec "$container" python3 -c 'import cryptography' 2>/dev/null && return
  docker exec "$container" mkdir -p /var/cache/kubesched-debs
  docker cp "$KUBESCHED_CACHE/debs/." "$container:/var/cache/kubesched-debs/"
  docker exec "$container" sh -c 'dpkg -i /var/cache/kubesched-debs/*.deb >/dev/null'
}

# site.yml with its output kept in $LAB/demo-<name>.log; records how long it took and how
# many tasks changed (from the PLAY RECAP), for the summary at the end.
SITE_RUNS=()
run_site() {
  local name=$1 label=$2 output start ms changed
  shift 2
  output=$LAB/demo-$name.log
  start=$(date +%s%N)
  if ! ansible-playbook -i "$INVENTORY" "$ROOT/playbooks/site.yml" "$@" 2>&1 | tee "$output"; then
    die "site.yml ($label) failed; the output is above and in $output. Fix it and run 'make demo' again."
  fi
  ms=$((($(date +%s%N) - start) / 1000000))
  changed=$(sed -n '/^PLAY RECAP/,$p' "$output" | grep -o 'changed=[0-9]*' | cut -d= -f2 | awk '{n += $1} END {print n + 0}')
  SITE_RUNS+=("$(printf '%-30s %6d.%01d s   %s' "site.yml, $label:" $((ms / 1000)) $((ms % 1000 / 100)) \
    "$([ "$changed" = 0 ] && echo 'changed=0 on every host (idempotent)' || echo "$changed tasks changed")")")
  printf 'demo: %s\n' "${SITE_RUNS[-1]}"
}

# S10: a StatefulSet of 3 replicas whose claims ask a WaitForFirstConsumer class with a local
# PV on each of demo-node-0..2 (lab/demo_stateful.py), and a table of replica -> node -> PV.
stateful_workload() {
  log "S10: a StatefulSet of 3 replicas; its claims ask a WaitForFirstConsumer class with a local PV on demo-node-0..2"
  demo_py stateful
}
stateful_table() {
  log "S10: each replica, its node and the PV its claim is bound to"
  demo_py stateful-table
}

up() {
  preflight
  bash "$ROOT/lab/build-image.sh" bookworm
  log "offline bundle for the masters (wheelhouse and Debian packages)"
  bash "$ROOT/lab/wheelhouse.sh"

  log "kwok nodes: demo-node-0..2 (4 CPU, 16Gi); demo-node-notready-0 (S2) says NotReady"
  demo_py nodes --prefix demo-node- --count 3
  demo_py nodes --prefix demo-node-notready- --count 1 --not-ready

  log "three container masters with systemd: ${MASTERS[*]}"
  for m in "${MASTERS[@]}"; do start_master "$m"; done
  for m in "${MASTERS[@]}"; do
    docker exec "$CONTAINER_PREFIX$m" systemctl is-system-running --wait >/dev/null 2>&1 || true
    install_offline_packages "$m"
  done

  log "site.yml: the default scheduler (kubesched) on the three masters, rolling, leader last"
  run_site site-default "default scheduler"
  log "site.yml again with inventories/lab/my-scheduler.yml: my-scheduler beside it (S6, S7)"
  run_site site-my-scheduler "my-scheduler" -e @"$ROOT/inventories/lab/my-scheduler.yml"

  log "S2: demo-node-notready-0 is not ready: the API server and the node lifecycle controller taint it"
  log "workloads for S2, S3, S5 and S6, a Deployment and a DaemonSet"
  demo_py workloads
  log "S2: the node's kubelet reports Ready (kwok); the node lifecycle controller lifts the not-ready taint"
  demo_py become-ready demo-node-notready-0
  stateful_workload
  demo_py wait
  local stateful_verdict=0
  stateful_table || stateful_verdict=$?

  log "where each pod landed, and why"
  local verdict=0
  demo_py table || verdict=$?
  gpu_workload || verdict=$?
  whatif_preview
  gang_workload || verdict=$?

  printf '\ndemo: timings\n'
  printf '  %s\n' "${SITE_RUNS[@]}"
  [ "$verdict" != 0 ] || verdict=$stateful_verdict
  [ "$verdict" = 0 ] || die "the placements above are not what the scenarios say (rows marked !). The schedulers' logs:
  docker exec ${CONTAINER_PREFIX}master1 journalctl -u kube-scheduler -u my-scheduler
Tear the demo down with 'make demo-down'."
  cat <<MSG

demo: done. The schedulers keep running in containers ${CONTAINER_PREFIX}master1..3:
  docker exec ${CONTAINER_PREFIX}master1 journalctl -u kube-scheduler -u my-scheduler
  $(lab_env)ansible-playbook -i inventories/lab/hosts.yml playbooks/verify.yml
Tear it all down with:  $(lab_env)make demo-down
(Stop the demo before 'make test': its schedulers would bind the tests' pods.)
MSG
}

down() {
  for m in "${MASTERS[@]}"; do docker rm -f "$CONTAINER_PREFIX$m" >/dev/null 2>&1 || true; done
  # Any other container the demo labelled (an older run's, or one renamed by hand).
  docker ps -aq --filter label=kubesched.io/demo=true | xargs -r docker rm -f >/dev/null
  echo "demo: containers removed (the schedulers ran inside them)"
  if [ -s "$KUBECONFIG_ADMIN" ] && bash "$ROOT/lab/lab.sh" status >/dev/null 2>&1; then
    demo_py delete-workloads
    demo_gpu down
    demo_gang down
    demo_py remove-namespaces kubesched-verify
    demo_py delete-stateful
    demo_py delete-nodes --prefix demo-node-
    ansible-playbook -i "$INVENTORY" "$ROOT/playbooks/demo-down.yml"
    echo "demo: down. The lab API server still runs; stop it with: $(lab_env)make lab-down"
  else
    echo "demo: the lab API server is not running; nothing to remove there"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
