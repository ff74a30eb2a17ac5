#!/usr/bin/env bash
# The main job on the local lab (make demo / make demo-down):
#   demo.sh up     fake nodes, 3 container masters, site.yml for the default scheduler and for
#                  my-scheduler, workloads for S2, S3, S5, S6, and a table of where each pod
#                  landed and why. Safe to run again.
#   demo.sh down   remove the containers and every demo object from the lab API server.
# Needs the lab API server (make lab-up), Docker and the base image (make setup).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/.venv
LAB=$ROOT/.lab
KUBECONFIG_ADMIN=$LAB/admin.kubeconfig
IMAGE=${KUBESCHED_MASTER_IMAGE:-localhost/kubesched-master:bookworm}
MASTERS=(master1 master2 master3)
CONTAINER_PREFIX=kubesched-demo-
INVENTORY=$ROOT/inventories/lab

export PATH=$VENV/bin:$PATH
site_packages=("$VENV"/lib/python3*/site-packages)
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$ROOT:${site_packages[0]}}
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
export PYTHONPATH=$ROOT
export ANSIBLE_FORCE_COLOR=${ANSIBLE_FORCE_COLOR:-0}

log() { printf '\ndemo: %s\n' "$*"; }
die() { printf 'demo: ERROR: %s\n' "$*" >&2; exit 1; }
demo_py() { "$VENV/bin/python" "$ROOT/lab/demo.py" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
kubesched_module() { ansible localhost -o -m "kubesched.scheduler.$1" -a "$2 kubeconfig=$KUBECONFIG_ADMIN"; }

preflight() {
  [ -x "$VENV/bin/ansible-playbook" ] || die "the venv is missing; run 'make setup'."
  if ! { [ -s "$KUBECONFIG_ADMIN" ] && bash "$ROOT/lab/lab.sh" status >/dev/null 2>&1; }; then
    die "the lab API server is not running; run 'make lab-up' (make demo does it for you)."
  fi
  docker info >/dev/null 2>&1 || die "no Docker engine answers; run 'make setup'."
  [ -e "$ROOT/ansible_collections/kubesched/scheduler" ] || {
    mkdir -p "$ROOT/ansible_collections/kubesched"
    ln -sfn "$ROOT" "$ROOT/ansible_collections/kubesched/scheduler"
  }
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
  docker cp "$HOME/.cache/kubesched/debs/." "$container:/var/cache/kubesched-debs/"
  docker exec "$container" sh -c 'dpkg -i /var/cache/kubesched-debs/*.deb >/dev/null'
}

timed() {
  local label=$1 start
  shift
  start=$(date +%s%N)
  "$@"
  local ms=$((($(date +%s%N) - start) / 1000000))
  printf 'demo: %s took %d.%01d s\n' "$label" $((ms / 1000)) $((ms % 1000 / 100))
}

up() {
  preflight
  bash "$ROOT/lab/build-image.sh"
  log "offline bundle for the masters (wheelhouse and Debian packages)"
  bash "$ROOT/lab/wheelhouse.sh"

  log "fake nodes: demo-node-0..2 (4 CPU, 16Gi) and demo-node-notready-0 (S2)"
  demo_py nodes --prefix demo-node- --count 3
  demo_py nodes --prefix demo-node-notready- --count 1

  log "three container masters with systemd: ${MASTERS[*]}"
  for m in "${MASTERS[@]}"; do start_master "$m"; done
  for m in "${MASTERS[@]}"; do
    docker exec "$CONTAINER_PREFIX$m" systemctl is-system-running --wait >/dev/null 2>&1 || true
    install_offline_packages "$m"
  done

  log "site.yml: the default scheduler (kubesched) on the three masters, rolling, leader last"
  timed "site.yml (default scheduler)" ansible-playbook -i "$INVENTORY" "$ROOT/playbooks/site.yml"
  log "site.yml again with inventories/lab/my-scheduler.yml: my-scheduler beside it (S6, S7)"
  timed "site.yml (my-scheduler)" ansible-playbook -i "$INVENTORY" "$ROOT/playbooks/site.yml" \
    -e @"$INVENTORY/my-scheduler.yml"

  log "S2: the node is not ready yet (taint added with the node_taint module)"
  kubesched_module node_taint "name=demo-node-notready-0 taints=node.kubernetes.io/not-ready:NoSchedule"
  log "workloads for S2, S3, S5 and S6"
  demo_py workloads
  demo_py wait
  log "where each pod landed, and why"
  demo_py table

  log "S2: the node becomes ready: the taint is removed with the node_taint module (state=absent)"
  kubesched_module node_taint "name=demo-node-notready-0 taints=node.kubernetes.io/not-ready state=absent"
  sleep 3
  demo_py wait
  log "the table again"
  demo_py table

  cat <<MSG

demo: done. The schedulers keep running in containers ${CONTAINER_PREFIX}master1..3:
  docker exec ${CONTAINER_PREFIX}master1 journalctl -u kube-scheduler -u my-scheduler
  ansible-playbook -i inventories/lab playbooks/verify.yml
Tear it all down with:  make demo-down
(Stop the demo before 'make test': its schedulers would bind the tests' pods.)
MSG
}

down() {
  for m in "${MASTERS[@]}"; do docker rm -f "$CONTAINER_PREFIX$m" >/dev/null 2>&1 || true; done
  echo "demo: containers removed"
  if [ -s "$KUBECONFIG_ADMIN" ] && bash "$ROOT/lab/lab.sh" status >/dev/null 2>&1; then
    demo_py delete-workloads
    demo_py remove-namespaces kubesched-verify
    demo_py delete-nodes --prefix demo-node-
    ansible-playbook -i "$INVENTORY" "$ROOT/playbooks/demo-down.yml"
  else
    echo "demo: the lab API server is not running; nothing to remove there"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
