#!/usr/bin/env bash
# etcd_run.sh <etcd-test-server.sh> <program>: runs the program with NIXL_ETCD_ENDPOINTS pointing
# at a throw-away etcd (loopback, free port) and its own NIXL_ETCD_NAMESPACE. Exit 77: no etcd.
set -uo pipefail
script=$1
prog=$2
dir=$(mktemp -d /tmp/nixl-compat-etcd-XXXXXX)
"$script" start "$dir/srv" >"$dir/start.out" 2>&1
rc=$?
if [[ $rc -eq 77 ]]; then
  echo "SKIPPED: no etcd binary (install etcd-server)"
  rm -rf "$dir"
  exit 77
fi
if [[ $rc -ne 0 ]]; then
  cat "$dir/start.out"
  rm -rf "$dir"
  exit 1
fi
trap '"$script" stop "$dir/srv" >/dev/null 2>&1; rm -rf "$dir"' EXIT
export NIXL_ETCD_ENDPOINTS
NIXL_ETCD_ENDPOINTS=$(cat "$dir/srv/endpoint")
export NIXL_ETCD_NAMESPACE=/nixl-compat-test-$$
"$prog"
