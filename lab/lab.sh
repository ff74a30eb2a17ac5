#!/usr/bin/env bash
# The local lab control plane: etcd and kube-apiserver on 127.0.0.1 with TLS and RBAC.
#   lab.sh up      start (idempotent), wait until /readyz answers
#   lab.sh down    stop both, leave no process behind, wipe etcd data
#   lab.sh status  say whether it runs (exit 0 when ready)
# Writes .lab/admin.kubeconfig (cluster-admin), .lab/ca.crt and .lab/ca.key.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${LAB_DIR:-$ROOT/.lab}
API_PORT=${LAB_API_PORT:-6443}
ETCD_PORT=${LAB_ETCD_PORT:-2379}
ETCD_PEER_PORT=${LAB_ETCD_PEER_PORT:-2380}
SERVER="https://127.0.0.1:$API_PORT"

log() { printf 'lab: %s\n' "$*" >&2; }
die() { printf 'lab: ERROR: %s\n' "$*" >&2; exit 1; }

bin_dir() { bash "$ROOT/lab/k8s-binaries.sh"; }

pid_alive() { [ -f "$LAB/$1.pid" ] && kill -0 "$(cat "$LAB/$1.pid")" 2>/dev/null; }

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

# A CA, a serving certificate for the API server, an admin client certificate and the
# service-account key pair. Made once and kept across up/down so that certificates the
# roles issue stay valid.
make_pki() {
  mkdir -p "$LAB/pki"
  chmod 0700 "$LAB" "$LAB/pki"
  cd "$LAB"
  if [ ! -s ca.key ] || [ ! -s ca.crt ]; then
    log "creating the cluster CA"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=kubesched-lab-ca" -out ca.crt \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    rm -f pki/apiserver.crt pki/admin.crt
  fi
  chmod 0600 ca.key
  if [ ! -s pki/apiserver.crt ]; then
    openssl genrsa -out pki/apiserver.key 2048 2>/dev/null
    openssl req -new -key pki/apiserver.key -subj "/CN=kube-apiserver" -out pki/apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' >pki/apiserver.ext
    openssl x509 -req -in pki/apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile pki/apiserver.ext -out pki/apiserver.crt 2>/dev/null
  fi
  if [ ! -s pki/admin.crt ]; then
    openssl genrsa -out pki/admin.key 2048 2>/dev/null
    openssl req -new -key pki/admin.key -subj "/O=system:masters/CN=kubernetes-admin" -out pki/admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' >pki/admin.ext
    openssl x509 -req -in pki/admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile pki/admin.ext -out pki/admin.crt 2>/dev/null
  fi
  if [ ! -s pki/sa.key ]; then
    openssl genrsa -out pki/sa.key 2048 2>/dev/null
    openssl rsa -in pki/sa.key -pubout -out pki/sa.pub 2>/dev/null
  fi
  chmod 0600 pki/*.key
  write_admin_kubeconfig
  cd - >/dev/null
}

write_admin_kubeconfig() {
  local tmp
  tmp=$(mktemp "$LAB/admin.kubeconfig.XXXXXX")
  cat >"$tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 <"$LAB/ca.crt")
users:
- name: kubernetes-admin
  user:
    client-certificate-data: $(base64 -w0 <"$LAB/pki/admin.crt")
    client-key-data: $(base64 -w0 <"$LAB/pki/admin.key")
contexts:
- name: lab
  context:
    cluster: lab
    user: kubernetes-admin
current-context: lab
KCFG
  chmod 0600 "$tmp"
  mv "$tmp" "$LAB/admin.kubeconfig"
}

readyz() {
  curl -fsS --max-time 2 --cacert "$LAB/ca.crt" --cert "$LAB/pki/admin.crt" --key "$LAB/pki/admin.key" \
    "$SERVER/readyz" >/dev/null 2>&1
}

start_etcd() {
  local bin=$1
  pid_alive etcd && return 0
  check_port_free "$ETCD_PORT" etcd LAB_ETCD_PORT
  check_port_free "$ETCD_PEER_PORT" "etcd peer" LAB_ETCD_PEER_PORT
  mkdir -p "$LAB/etcd-data"
  chmod 0700 "$LAB/etcd-data"
  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  setsid "$bin/etcd" --name lab --data-dir "$LAB/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "lab=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --quota-backend-bytes 8589934592 \
    --log-level warn </dev/null >"$LAB/etcd.log" 2>&1 &
  echo $! >"$LAB/etcd.pid"
  for _ in $(seq 1 50); do
    curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && return 0
    pid_alive etcd || { tail -20 "$LAB/etcd.log" >&2; die "etcd exited at start-up (log above, full log $LAB/etcd.log)"; }
    sleep 0.2
  done
  die "etcd did not answer on 127.0.0.1:$ETCD_PORT within 10 s; see $LAB/etcd.log"
}

start_apiserver() {
  local bin=$1
  pid_alive kube-apiserver && return 0
  check_port_free "$API_PORT" kube-apiserver LAB_API_PORT
  log "starting kube-apiserver on $SERVER"
  # Two admission plugins are off because the lab has no controller-manager: ServiceAccount
  # (nothing creates the default service accounts, and no kubelet needs tokens) and
  # TaintNodesByCondition (nothing would lift the not-ready taint it puts on new nodes).
  setsid "$bin/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$LAB/pki/apiserver.crt" --tls-private-key-file="$LAB/pki/apiserver.key" \
    --client-ca-file="$LAB/ca.crt" \
    --authorization-mode=Node,RBAC \
    --service-account-key-file="$LAB/pki/sa.pub" --service-account-signing-key-file="$LAB/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
    --allow-privileged=true --profiling=false \
    --max-requests-inflight=1000 --max-mutating-requests-inflight=500 \
    </dev/null >"$LAB/kube-apiserver.log" 2>&1 &
  echo $! >"$LAB/kube-apiserver.pid"
}

wait_ready() {
  for _ in $(seq 1 300); do
    readyz && return 0
    pid_alive kube-apiserver || { tail -20 "$LAB/kube-apiserver.log" >&2; die "kube-apiserver exited at start-up (log above, full log $LAB/kube-apiserver.log)"; }
    sleep 0.2
  done
  die "kube-apiserver did not become ready within 60 s; see $LAB/kube-apiserver.log"
}

stop_one() {
  local name=$1 pid
  [ -f "$LAB/$name.pid" ] || return 0
  pid=$(cat "$LAB/$name.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$LAB/$name.pid"
}

cmd_up() {
  local start=$SECONDS bin
  if pid_alive kube-apiserver && pid_alive etcd && readyz; then
    log "already running at $SERVER"
    return 0
  fi
  command -v openssl >/dev/null || die "openssl is missing; install it (apt-get install openssl)."
  command -v ss >/dev/null || die "ss is missing; install iproute2."
  pid_alive etcd || { check_port_free "$ETCD_PORT" etcd LAB_ETCD_PORT
                      check_port_free "$ETCD_PEER_PORT" "etcd peer" LAB_ETCD_PEER_PORT; }
  pid_alive kube-apiserver || check_port_free "$API_PORT" kube-apiserver LAB_API_PORT
  bin=$(bin_dir)
  mkdir -p "$LAB"
  make_pki
  start_etcd "$bin"
  start_apiserver "$bin"
  wait_ready
  log "ready at $SERVER in $((SECONDS - start)) s; kubeconfig: $LAB/admin.kubeconfig"
}

cmd_down() {
  stop_one kube-apiserver
  stop_one etcd
  rm -rf "$LAB/etcd-data"
  log "stopped"
}

cmd_status() {
  if pid_alive kube-apiserver && pid_alive etcd && readyz; then
    echo "lab: running at $SERVER (etcd pid $(cat "$LAB/etcd.pid"), kube-apiserver pid $(cat "$LAB/kube-apiserver.pid")); kubeconfig $LAB/admin.kubeconfig"
  elif pid_alive kube-apiserver || pid_alive etcd; then
    echo "lab: partly running (etcd: $(pid_alive etcd && echo up || echo down), kube-apiserver: $(pid_alive kube-apiserver && echo up || echo down), ready: no). Run 'make lab-down' then 'make lab-up'."
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
