#!/usr/bin/env bash
# Starts or stops a throw-away etcd for tests: loopback only, free ports, a temporary data dir.
#
#   scripts/etcd-test-server.sh start DIR   # prints the client URL; DIR holds pid, endpoint, log, data
#   scripts/etcd-test-server.sh stop DIR    # stops it and removes DIR
#   scripts/etcd-test-server.sh halt DIR    # stops the server, keeps its data and ports
#   scripts/etcd-test-server.sh resume DIR  # starts a halted server again: same URL, same data
#   scripts/etcd-test-server.sh env DIR     # prints "export NIXL_ETCD_ENDPOINTS=<url>"
#
# Exit status 77 from start means "no etcd binary" (tests treat it as a skip).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop|halt|resume|env DIR" >&2
  exit 2
fi

etcd_bin=${ETCD_BIN:-$(command -v etcd || true)}

free_port() {
  # Ask the kernel for an unused loopback port.
  if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
  else
    echo $((20000 + RANDOM % 20000))
  fi
}

healthy() {
  # GET /health over bash's /dev/tcp: no curl or etcdctl needed (etcd-server ships neither).
  local port=${1##*:} reply
  reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port &&
    printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && cat <&3" 2>/dev/null) || return 1
  [[ "$reply" == *'"health":"true"'* ]]
}

stop() {
  nixl_stop_pid "$dir/pid"
  rm -rf "$dir"
}

# launch CPORT PPORT: etcd on those loopback ports over $dir/data; true once it answers /health.
launch() {
  local url="http://127.0.0.1:$1"
  # Short election/heartbeat keep the minimum lease TTL at etcd's default of 2 s.
  "$etcd_bin" --name nixl-test --data-dir "$dir/data" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "http://127.0.0.1:$2" \
    --initial-advertise-peer-urls "http://127.0.0.1:$2" \
    --initial-cluster "nixl-test=http://127.0.0.1:$2" \
    --log-level error </dev/null >>"$dir/log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 100); do
    if healthy "$url"; then
      echo "$1 $2" >"$dir/ports"
      echo "$url" >"$dir/endpoint"
      return 0
    fi
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
    sleep 0.1
  done
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  wait "$(cat "$dir/pid")" 2>/dev/null || true
  return 1
}

no_etcd() {
  if [[ -z "$etcd_bin" || ! -x "$etcd_bin" ]]; then
    echo "etcd not found; install etcd-server (Debian) or set ETCD_BIN" >&2
    exit 77
  fi
}

case "$cmd" in
  start)
    no_etcd
    mkdir -p "$dir"
    for attempt in 1 2 3; do
      cport=$(free_port)
      pport=$(free_port)
      [[ "$cport" == "$pport" ]] && continue
      rm -rf "$dir/data"
      if launch "$cport" "$pport"; then
        cat "$dir/endpoint"
        exit 0
      fi
    done
    echo "etcd did not come up; log:" >&2
    tail -20 "$dir/log" >&2 || true
    stop
    exit 1
    ;;
  stop)
    stop
    ;;
  halt)
    nixl_stop_pid "$dir/pid"
    rm -f "$dir/pid"
    ;;
  resume)
    no_etcd
    read -r cport pport <"$dir/ports"
    # The ports were free a moment ago; a client's reconnects do not hold them.
    for attempt in 1 2 3; do
      launch "$cport" "$pport" && exit 0
      sleep 0.5
    done
    echo "etcd did not come back on $cport; log:" >&2
    tail -20 "$dir/log" >&2 || true
    exit 1
    ;;
  env)
    echo "export NIXL_ETCD_ENDPOINTS=$(cat "$dir/endpoint")"
    ;;
  *)
    echo "usage: $0 start|stop|halt|resume|env DIR" >&2
    exit 2
    ;;
esac
