#!/usr/bin/env bash
# The local lab cluster on 127.0.0.1, with TLS and RBAC, started in this order and each
# waited on until healthy:
#   etcd                     LAB_ETCD_PORT (2379), LAB_ETCD_PEER_PORT (2380)
#   kube-apiserver           LAB_API_PORT (6443); every admission plugin at its default
#   kube-controller-manager  LAB_KCM_PORT (secure port, 127.0.0.1); client certificate
#                            CN=system:kube-controller-manager, one service account per
#                            controller (--use-service-account-credentials), the lab CA as
#                            cluster signer, no leader election (one instance per lab)
#   kwok                     LAB_KWOK_PORT (health and metrics, 127.0.0.1); client
#                            certificate CN=kwok-controller with its own ClusterRole. It keeps
#                            the nodes annotated kwok.x-k8s.io/node=fake alive (status and
#                            node Leases) and plays their pods' lifecycle (lab/kwok-stages.yaml:
#                            bound pods become Running, deleted pods stay Terminating for their
#                            grace period, then go)
#
#   lab.sh up      start what is not running (idempotent); waits until each part is healthy
#                  and the serviceaccount controller has made the `default` ServiceAccount
#   lab.sh down    stop all four, leave no process behind, wipe etcd data
#   lab.sh status  one line per component (exit 0 when all are healthy, 1 when some are,
#                  3 when none runs)
#
# Several labs side by side (the tests' shared lab, a developer's private lab, the
# reliability suite's, the benchmark's): LAB_DIR and the ports set them apart. When
# LAB_API_PORT is not 6443, the two newer ports default to LAB_API_PORT+3 and +4 (the
# assignments in use give etcd +1 and +2), so an existing private-lab command line keeps
# working without colliding with the shared lab's 10257/10247. Set LAB_KCM_PORT and
# LAB_KWOK_PORT to choose them yourself (the benchmark passes free ports).
#
# Two more knobs, for harnesses that need less than a whole cluster:
#   LAB_KCM_CONTROLLERS   kube-controller-manager's --controllers (default '*'); the
#                         benchmark runs 'serviceaccount,namespace' because its thousands of
#                         static nodes send no heartbeats, so a node lifecycle controller
#                         would mark them unreachable
#   LAB_KCM_API_QPS       kube-controller-manager's --kube-api-qps (default 20, burst 1.5x, as
#                         kcm's own defaults); the benchmark raises it so the resourceclaim
#                         controller makes claims as fast as scheduler_perf's in-process one
#   LAB_KWOK=0            do not start kwok (static nodes only)
#   LAB_KWOK_POD_PARALLELISM  how many pod stages kwok plays at once (kwok's default 4). A real
#                         cluster has a kubelet per node; the soak's 50 pods/s of arrivals,
#                         completions and deletions need more than 4 (the population grew
#                         without end, and terminating victims held preemptors back)
#   LAB_FEATURE_GATES     --feature-gates for kube-apiserver and kube-controller-manager
#                         (default none); the gang tests pass GenericWorkload=true
#   LAB_RUNTIME_CONFIG    kube-apiserver's --runtime-config (default none); a beta API such
#                         as scheduling.k8s.io/v1beta1 (Workloads, PodGroups) needs it too.
#                         Both take effect when a component starts: 'lab.sh down' first to
#                         change them on a running lab
#
# Writes <LAB_DIR>/admin.kubeconfig (cluster-admin), ca.crt and ca.key, and one kubeconfig
# per component; logs are <LAB_DIR>/<component>.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${LAB_DIR:-$ROOT/.lab}
API_PORT=${LAB_API_PORT:-6443}
ETCD_PORT=${LAB_ETCD_PORT:-2379}
ETCD_PEER_PORT=${LAB_ETCD_PEER_PORT:-2380}
if [ "$API_PORT" = 6443 ]; then
  KCM_PORT=${LAB_KCM_PORT:-10257}
  KWOK_PORT=${LAB_KWOK_PORT:-10247}
else
  KCM_PORT=${LAB_KCM_PORT:-$((API_PORT + 3))}
  KWOK_PORT=${LAB_KWOK_PORT:-$((API_PORT + 4))}
fi
KCM_CONTROLLERS=${LAB_KCM_CONTROLLERS:-*}
KCM_API_QPS=${LAB_KCM_API_QPS:-20}
KWOK_POD_PARALLELISM=${LAB_KWOK_POD_PARALLELISM:-}
WANT_KWOK=${LAB_KWOK:-1}
FEATURE_GATE_ARGS=()
[ -z "${LAB_FEATURE_GATES:-}" ] || FEATURE_GATE_ARGS=(--feature-gates="$LAB_FEATURE_GATES")
RUNTIME_CONFIG_ARGS=()
[ -z "${LAB_RUNTIME_CONFIG:-}" ] || RUNTIME_CONFIG_ARGS=(--runtime-config="$LAB_RUNTIME_CONFIG")
SERVER="https://127.0.0.1:$API_PORT"
# The annotation kwok selects its nodes by (kwok's own convention); lab/fake_nodes.py sets it.
KWOK_NODE_SELECTOR="kwok.x-k8s.io/node=fake"

log() { printf 'lab: %s\n' "$*" >&2; }
die() { printf 'lab: ERROR: %s\n' "$*" >&2; exit 1; }
[ -z "$KWOK_POD_PARALLELISM" ] || [[ "$KWOK_POD_PARALLELISM" =~ ^[1-9][0-9]*$ ]] ||
  die "LAB_KWOK_POD_PARALLELISM must be a positive whole number, not '$KWOK_POD_PARALLELISM'"

bin_dir() { bash "$ROOT/lab/k8s-binaries.sh"; }

# A process that exited but was not reaped yet (a zombie) counts as gone.
pid_alive() {
  local pid state
  [ -f "$LAB/$1.pid" ] || return 1
  pid=$(cat "$LAB/$1.pid")
  state=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  [[ $state != Z* ]]
}

port_owner() {
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -1
}

check_port_free() {
  local port=$1 what=$2 var=$3 owner
  if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
    owner=$(port_owner "$port")
    die "port $port (for $what) is already taken by ${owner:-another process}. Stop it, or pick another port with $var=<port>."
  fi
}

# sign NAME SUBJECT EXTENSIONS: pki/NAME.key and pki/NAME.crt signed by the lab CA.
sign() {
  local name=$1 subject=$2 ext=$3
  openssl genrsa -out "pki/$name.key" 2048 2>/dev/null
  openssl req -new -key "pki/$name.key" -subj "$subject" -out "pki/$name.csr" 2>/dev/null
  printf '%b' "$ext" >"pki/$name.ext"
  openssl x509 -req -in "pki/$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "pki/$name.ext" -out "pki/$name.crt" 2>/dev/null
}

# A CA, a serving certificate for the API server, a client certificate per identity and the
# service-account key pair. Made once and kept across up/down so that certificates the
# roles issue stay valid.
make_pki() {
  local client_ext='extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
  mkdir -p "$LAB/pki"
  chmod 0700 "$LAB" "$LAB/pki"
  cd "$LAB"
  if [ ! -s ca.key ] || [ ! -s ca.crt ]; then
    log "creating the cluster CA"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=kubesched-lab-ca" -out ca.crt \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    rm -f pki/apiserver.crt pki/admin.crt pki/kube-controller-manager.crt pki/kwok.crt
  fi
  chmod 0600 ca.key
  [ -s pki/apiserver.crt ] || sign apiserver "/CN=kube-apiserver" \
    'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n'
  [ -s pki/admin.crt ] || sign admin "/O=system:masters/CN=kubernetes-admin" "$client_ext"
  # The identities the API server's bootstrap RBAC policy knows (system:kube-controller-manager)
  # and one the lab grants itself (kwok-controller, lab/kwok-rbac.yaml).
  [ -s pki/kube-controller-manager.crt ] || sign kube-controller-manager "/CN=system:kube-controller-manager" "$client_ext"
  [ -s pki/kwok.crt ] || sign kwok "/CN=kwok-controller" "$client_ext"
  if [ ! -s pki/sa.key ]; then
    openssl genrsa -out pki/sa.key 2048 2>/dev/null
    openssl rsa -in pki/sa.key -pubout -out pki/sa.pub 2>/dev/null
  fi
  chmod 0600 pki/*.key
  write_kubeconfig admin.kubeconfig kubernetes-admin admin
  write_kubeconfig kube-controller-manager.kubeconfig system:kube-controller-manager kube-controller-manager
  write_kubeconfig kwok.kubeconfig kwok-controller kwok
  cd - >/dev/null
}

# write_kubeconfig FILE USER PKI_NAME: a kubeconfig for the lab with pki/PKI_NAME's certificate.
write_kubeconfig() {
  local file=$1 user=$2 cert=$3 tmp
  tmp=$(mktemp "$LAB/$file.XXXXXX")
  cat >"$tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 <"$LAB/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$LAB/pki/$cert.crt")
    client-key-data: $(base64 -w0 <"$LAB/pki/$cert.key")
contexts:
- name: lab
  context:
    cluster: lab
    user: $user
current-context: lab
KCFG
  chmod 0600 "$tmp"
  mv "$tmp" "$LAB/$file"
}

admin_curl() {
  curl -fsS --max-time 2 --cacert "$LAB/ca.crt" --cert "$LAB/pki/admin.crt" --key "$LAB/pki/admin.key" "$@"
}

etcd_healthy() { curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1; }
readyz() { admin_curl "$SERVER/readyz" >/dev/null 2>&1; }
# The controller-manager serves a self-signed certificate; /healthz needs no credentials.
kcm_healthy() { [ "$(curl -ksS --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" = ok ]; }
kwok_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$KWOK_PORT/healthz" >/dev/null 2>&1; }
default_service_account() { admin_curl "$SERVER/api/v1/namespaces/default/serviceaccounts/default" >/dev/null 2>&1; }

# wait_healthy COMPONENT CHECK SECONDS FIX: poll CHECK until it passes; when the process dies
# or the time runs out, show the log's tail and say what to do.
wait_healthy() {
  local name=$1 check=$2 seconds=$3 fix=$4 i
  for ((i = 0; i < seconds * 5; i++)); do
    "$check" && return 0
    if ! pid_alive "$name"; then
      tail -20 "$LAB/$name.log" >&2
      die "$name exited at start-up (log above, full log $LAB/$name.log). $fix"
    fi
    sleep 0.2
  done
  tail -20 "$LAB/$name.log" >&2
  die "$name did not become healthy within $seconds s (log above, full log $LAB/$name.log). $fix"
}

# launch NAME COMMAND...: start a component in its own session, logging to NAME.log.
launch() {
  local name=$1
  shift
  setsid "$@" </dev/null >"$LAB/$name.log" 2>&1 &
  echo $! >"$LAB/$name.pid"
}

start_etcd() {
  local bin=$1
  if ! pid_alive etcd; then
    mkdir -p "$LAB/etcd-data"
    chmod 0700 "$LAB/etcd-data"
    log "starting etcd on 127.0.0.1:$ETCD_PORT"
    launch etcd "$bin/etcd" --name lab --data-dir "$LAB/etcd-data" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster "lab=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --quota-backend-bytes 8589934592 \
      --log-level warn
  fi
  wait_healthy etcd etcd_healthy 10 "A taken port moves with LAB_ETCD_PORT / LAB_ETCD_PEER_PORT; damaged data goes with 'lab.sh down'."
}

start_apiserver() {
  local bin=$1
  if ! pid_alive kube-apiserver; then
    log "starting kube-apiserver on $SERVER"
    launch kube-apiserver "$bin/kube-apiserver" \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
      --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
      --tls-cert-file="$LAB/pki/apiserver.crt" --tls-private-key-file="$LAB/pki/apiserver.key" \
      --client-ca-file="$LAB/ca.crt" \
      --authorization-mode=Node,RBAC \
      --service-account-key-file="$LAB/pki/sa.pub" --service-account-signing-key-file="$LAB/pki/sa.key" \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
      --allow-privileged=true --profiling=false \
      --max-requests-inflight=1000 --max-mutating-requests-inflight=500 \
      ${FEATURE_GATE_ARGS[@]+"${FEATURE_GATE_ARGS[@]}"} ${RUNTIME_CONFIG_ARGS[@]+"${RUNTIME_CONFIG_ARGS[@]}"}
  fi
  wait_healthy kube-apiserver readyz 60 "A taken port moves with LAB_API_PORT."
}

start_controller_manager() {
  local bin=$1
  if ! pid_alive kube-controller-manager; then
    log "starting kube-controller-manager (secure port 127.0.0.1:$KCM_PORT, controllers $KCM_CONTROLLERS)"
    local kubeconfig="$LAB/kube-controller-manager.kubeconfig"
    launch kube-controller-manager "$bin/kube-controller-manager" \
      --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
      --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
      --use-service-account-credentials=true \
      --service-account-private-key-file="$LAB/pki/sa.key" \
      --root-ca-file="$LAB/ca.crt" \
      --cluster-signing-cert-file="$LAB/ca.crt" --cluster-signing-key-file="$LAB/ca.key" \
      --cluster-name=kubesched-lab --controllers="$KCM_CONTROLLERS" \
      --kube-api-qps="$KCM_API_QPS" --kube-api-burst="$((KCM_API_QPS * 3 / 2))" \
      --leader-elect=false --profiling=false ${FEATURE_GATE_ARGS[@]+"${FEATURE_GATE_ARGS[@]}"}
  fi
  wait_healthy kube-controller-manager kcm_healthy 60 \
    "A taken port moves with LAB_KCM_PORT; a certificate the API server refuses is remade by 'lab.sh down', 'rm -rf $LAB/pki $LAB/ca.*' and 'lab.sh up'."
}

start_kwok() {
  local bin=$1
  if ! pid_alive kwok; then
    # kwok acts through its own identity: grant it what lab/kwok-rbac.yaml lists first.
    "$bin/kubectl" --kubeconfig "$LAB/admin.kubeconfig" apply -f "$ROOT/lab/kwok-rbac.yaml" >"$LAB/kwok-rbac.log" 2>&1 ||
      { cat "$LAB/kwok-rbac.log" >&2; die "granting kwok its RBAC (lab/kwok-rbac.yaml) failed (above; log $LAB/kwok-rbac.log). Fix the manifest, then run 'lab.sh up' again."; }
    local configs=(--config="$ROOT/lab/kwok-stages.yaml")
    if [ -n "$KWOK_POD_PARALLELISM" ]; then
      # kwok does not default a KwokConfiguration it reads: the rest are its defaults, spelled out.
      cat >"$LAB/kwok-options.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: $KWOK_POD_PARALLELISM
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  enableDebuggingHandlers: true
  enableProfilingHandler: true
  enableContentionProfiling: false
EOF
      configs+=(--config="$LAB/kwok-options.yaml")
    fi
    log "starting kwok (nodes annotated $KWOK_NODE_SELECTOR; health on 127.0.0.1:$KWOK_PORT)"
    launch kwok "$bin/kwok" --kubeconfig="$LAB/kwok.kubeconfig" "${configs[@]}" \
      --manage-all-nodes=false --manage-nodes-with-annotation-selector="$KWOK_NODE_SELECTOR" \
      --server-address="127.0.0.1:$KWOK_PORT" --cidr=10.244.0.0/16 --node-ip=10.240.0.1 \
      --node-lease-duration-seconds=40
  fi
  wait_healthy kwok kwok_healthy 60 \
    "A taken port moves with LAB_KWOK_PORT; a stage error names lab/kwok-stages.yaml; 'Forbidden' means lab/kwok-rbac.yaml lacks a rule."
}

stop_one() {
  local name=$1 pid
  [ -f "$LAB/$name.pid" ] || return 0
  pid=$(cat "$LAB/$name.pid")
  if pid_alive "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do pid_alive "$name" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$LAB/$name.pid"
}

components() {
  echo etcd kube-apiserver kube-controller-manager
  [ "$WANT_KWOK" = 0 ] || echo kwok
}

all_healthy() {
  pid_alive etcd && pid_alive kube-apiserver && pid_alive kube-controller-manager &&
    { [ "$WANT_KWOK" = 0 ] || pid_alive kwok; } &&
    readyz && kcm_healthy && { [ "$WANT_KWOK" = 0 ] || kwok_healthy; }
}

cmd_up() {
  local start=$SECONDS bin i
  if all_healthy; then
    log "already running at $SERVER"
    return 0
  fi
  command -v openssl >/dev/null || die "openssl is missing; install it (apt-get install openssl)."
  command -v ss >/dev/null || die "ss is missing; install iproute2."
  # Every port is checked before anything starts, so a clash leaves nothing half-started.
  pid_alive etcd || { check_port_free "$ETCD_PORT" etcd LAB_ETCD_PORT
                      check_port_free "$ETCD_PEER_PORT" "etcd peer" LAB_ETCD_PEER_PORT; }
  pid_alive kube-apiserver || check_port_free "$API_PORT" kube-apiserver LAB_API_PORT
  pid_alive kube-controller-manager || check_port_free "$KCM_PORT" kube-controller-manager LAB_KCM_PORT
  [ "$WANT_KWOK" = 0 ] || pid_alive kwok || check_port_free "$KWOK_PORT" kwok LAB_KWOK_PORT
  bin=$(bin_dir)
  mkdir -p "$LAB"
  make_pki
  start_etcd "$bin"
  start_apiserver "$bin"
  start_controller_manager "$bin"
  [ "$WANT_KWOK" = 0 ] || start_kwok "$bin"
  # Pods need their namespace's `default` ServiceAccount (ServiceAccount admission); the
  # serviceaccount controller making it is the proof that the controllers act.
  if [[ "$KCM_CONTROLLERS" == *'*'* || "$KCM_CONTROLLERS" == *serviceaccount* ]] && [[ "$KCM_CONTROLLERS" != *-serviceaccount* ]]; then
    for ((i = 0; i < 150; i++)); do default_service_account && break; sleep 0.2; done
    default_service_account || die "the serviceaccount controller made no 'default' ServiceAccount within 30 s; see $LAB/kube-controller-manager.log"
  fi
  log "ready at $SERVER in $((SECONDS - start)) s; kubeconfig: $LAB/admin.kubeconfig"
}

cmd_down() {
  stop_one kwok
  stop_one kube-controller-manager
  stop_one kube-apiserver
  stop_one etcd
  rm -rf "$LAB/etcd-data"
  log "stopped"
}

component_state() {
  local name=$1 check=$2 detail=$3
  if ! pid_alive "$name"; then
      echo "  $name: not running"
      return 1
    fi
    if "$check"; then
      echo "  $name: healthy (pid $(cat "$LAB/$name.pid"), $detail)"
    else
      echo "  $name: running but not healthy (pid $(cat "$LAB/$name.pid"), $detail); see $LAB/$name.log"
      return 1
    fi
  }

  cmd_status() {
    local report healthy=0 total=0 name
    report=$(
      component_state etcd etcd_healthy "127.0.0.1:$ETCD_PORT" || true
      component_state kube-apiserver readyz "$SERVER" || true
      component_state kube-controller-manager kcm_healthy "secure port 127.0.0.1:$KCM_PORT" || true
      if [ "$WANT_KWOK" = 0 ]; then echo "  kwok: not wanted (LAB_KWOK=0)"; else
        component_state kwok kwok_healthy "127.0.0.1:$KWOK_PORT" || true; fi
    )
    for name in $(components); do
      total=$((total + 1))
      grep -q "^  $name: healthy" <<<"$report" && healthy=$((healthy + 1))
    done
    if [ "$healthy" = "$total" ]; then
      echo "lab: running at $SERVER; kubeconfig $LAB/admin.kubeconfig"
      echo "$report"
    elif grep -q ': running\|: healthy' <<<"$report"; then
      echo "lab: partly running ($healthy of $total components healthy). Run 'make lab-down' then 'make lab-up'."
      echo "$report"
      return 1
    else
      echo "lab: not running. Start it with 'make lab-up'."
      return 3
    fi
  }

  case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
  esac
