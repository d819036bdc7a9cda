#!/usr/bin/env bash
# A private Ceph cluster with an S3 gateway, for the object-storage tests and
# benchmarks: one monitor, one OSD storing into a sparse file, radosgw's
# beast frontend, all on 127.0.0.1, all under one scratch folder.
#
#   scripts/ceph_gateway.sh start DIR [PORT]   bring it up (fresh or kept data)
#   scripts/ceph_gateway.sh stop DIR           stop every daemon
#   scripts/ceph_gateway.sh stop-rgw DIR       stop the gateway only
#   scripts/ceph_gateway.sh start-rgw DIR      start the gateway again
#
# `start` writes DIR/env (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, AWS_REGION) for `source`. Needs Debian's ceph-mon,
# ceph-osd, radosgw, ceph-common and uuid-runtime (scripts/setup.sh).
# Settings that matter are explained in docs/OBJECT_STORAGE.md.
set -euo pipefail

cmd=${1:?usage: ceph_gateway.sh start|stop|stop-rgw|start-rgw DIR [PORT]}
DIR=$(realpath -m "${2:?scratch folder}")
CONF=$DIR/ceph.conf

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  local i
  for ((i = 0; i < limit * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "ceph_gateway: $what did not come up in ${limit} s; logs in $DIR/log" >&2
  tail -n 20 "$DIR"/log/*.log >&2 || true
  return 1
}

stop_daemon() {  # stop_daemon NAME
  local pidfile=$DIR/run/$1.pid pid i
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill "$pid" 2>/dev/null; then
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

start_rgw() {
  local port
  port=$(cat "$DIR/port")
  radosgw -c "$CONF" -n client.rgw.a
  wait_for 60 "radosgw on 127.0.0.1:$port" curl -sf -o /dev/null "http://127.0.0.1:$port/"
}

case "$cmd" in
start)
  PORT=${3:-7480}
  MON_PORT=$((PORT + 1))
  mkdir -p "$DIR"/{mon,osd,run,log,rgw}
  echo "$PORT" >"$DIR/port"
  fresh=0
  if [ ! -f "$CONF" ]; then
    fresh=1
    fsid=$(uuidgen)
    cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon_host = v2:127.0.0.1:$MON_PORT
public_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_port_min = $((PORT + 2))
ms_bind_port_max = $((PORT + 40))
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_mon_client_mode = crc
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
mon_max_pg_per_osd = 1000
run_dir = $DIR/run
pid_file = $DIR/run/\$name.pid
admin_socket = $DIR/run/\$name.asok
log_file = $DIR/log/\$name.log
keyring = $DIR/keyring
[mon]
mon_data = $DIR/mon/\$id
paxos_propose_interval = 0.1
mon_warn_on_pool_no_redundancy = false
[osd]
osd_data = $DIR/osd/\$id
osd_objectstore = bluestore
bluestore_block_path = $DIR/osd/block
bluestore_block_size = 8589934592
bluestore_block_create = true
osd_memory_target = 939524096
bluestore_cache_size = 134217728
[client.rgw.a]
rgw_frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
rgw_data = $DIR/rgw
# Virtual-hosted requests (BUCKET.localhost: libcurl resolves *.localhost
# to the loopback itself); requests to 127.0.0.1 are path-style.
rgw_dns_name = localhost
EOF
    monmaptool --create --clobber --add a "v2:127.0.0.1:$MON_PORT" --fsid "$fsid" "$DIR/monmap" >/dev/null
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" 2>>"$DIR/log/setup.log"
  fi
  ceph-mon -c "$CONF" -i a
  wait_for 30 "ceph-mon" ceph -c "$CONF" --connect-timeout 2 mon stat
  if [ "$fresh" = 1 ]; then
    osd=$(ceph -c "$CONF" osd create)
    mkdir -p "$DIR/osd/$osd"
    ceph-osd -c "$CONF" -i "$osd" --mkfs 2>>"$DIR/log/setup.log"
  fi
  ceph-osd -c "$CONF" -i 0
  wait_for 60 "ceph-osd" bash -c "ceph -c '$CONF' osd stat | grep -q '1 up'"
  start_rgw
  if [ "$fresh" = 1 ]; then
    radosgw-admin -c "$CONF" user create --uid imagepack-test --display-name imagepack-test \
      --access-key IMAGEPACKTESTKEY0001 --secret-key imagepack-test-secret-0001 >/dev/null
  fi
  cat >"$DIR/env" <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=IMAGEPACKTESTKEY0001
export AWS_SECRET_ACCESS_KEY=imagepack-test-secret-0001
export AWS_REGION=us-east-1
EOF
  echo "ceph_gateway: S3 at http://127.0.0.1:$PORT ($DIR/env)"
  ;;
stop)
  stop_daemon client.rgw.a
  stop_daemon osd.0
  stop_daemon mon.a
  ;;
stop-rgw) stop_daemon client.rgw.a ;;
start-rgw) start_rgw ;;
*)
  echo "ceph_gateway: unknown command $cmd" >&2
  exit 2
  ;;
esac
