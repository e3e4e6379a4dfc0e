#!/usr/bin/env bash
# Starts or stops a throw-away object store for tests: s3rver (S3) or azurite (Azure Blob), on
# 127.0.0.1 only, a free port (or the one given), its data in a folder of its own.
#
#   scripts/obj-test-server.sh start s3|azure DIR [PORT]  # prints the endpoint; DIR holds pid,
#                                                          # port, endpoint, log and data
#   scripts/obj-test-server.sh kill DIR                    # stops the server, keeps DIR (restart
#                                                          # with start ... DIR PORT)
#   scripts/obj-test-server.sh stop DIR                    # stops it and removes DIR
#
# The servers come from npm under NIXL_NODE_PREFIX (default /opt/nixl/node, where
# scripts/install-deps.sh puts them). s3rver: bucket "nixl-test", credentials S3RVER/S3RVER.
# azurite: account devstoreaccount1 with its well-known key. Exit status 77 from start means
# "node or the server is not installed" (tests treat it as a skip).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cmd=${1:-}
prefix=${NIXL_NODE_PREFIX:-/opt/nixl/node}
bin=$prefix/node_modules/.bin

usage() {
  echo "usage: $0 start s3|azure DIR [PORT] | kill DIR | stop DIR" >&2
  exit 2
}

kill_server() {
  nixl_stop_pid "$1/pid"
  rm -f "$1/pid"
}

case "$cmd" in
  start)
    kind=${2:-}
    dir=${3:-}
    port=${4:-0}
    [[ -n "$kind" && -n "$dir" ]] || usage
    if ! command -v node >/dev/null; then
      echo "node not found; run scripts/install-deps.sh (apt nodejs npm)" >&2
      exit 77
    fi
    case "$kind" in
      s3) exe=$bin/s3rver ;;
      azure) exe=$bin/azurite-blob ;;
      *) usage ;;
    esac
    if [[ ! -x "$exe" ]]; then
      echo "$exe not found; run scripts/install-deps.sh (npm packages under $prefix)" >&2
      exit 77
    fi
    mkdir -p "$dir/data"
    kill_server "$dir"
    : >"$dir/log"
    if [[ $kind == s3 ]]; then
      "$exe" -d "$dir/data" -a 127.0.0.1 -p "$port" -s --configure-bucket nixl-test \
        --no-vhost-buckets </dev/null >"$dir/log" 2>&1 &
      pattern='S3rver listening on 127\.0\.0\.1:([0-9]+)'
    else
      "$exe" --skipApiVersionCheck --disableTelemetry --loose -s -l "$dir/data" \
        --blobHost 127.0.0.1 --blobPort "$port" </dev/null >"$dir/log" 2>&1 &
      pattern='listens on http://127\.0\.0\.1:([0-9]+)'
    fi
    echo $! >"$dir/pid"
    for _ in $(seq 300); do
      if [[ $(cat "$dir/log") =~ $pattern ]]; then
        port=${BASH_REMATCH[1]}
        echo "$port" >"$dir/port"
        echo "127.0.0.1:$port" >"$dir/endpoint"
        echo "127.0.0.1:$port"
        exit 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.1
    done
    echo "$kind server did not come up; log:" >&2
    tail -20 "$dir/log" >&2 || true
    kill_server "$dir"
    exit 1
    ;;
  kill)
    [[ -n "${2:-}" ]] || usage
    kill_server "$2"
    ;;
  stop)
    [[ -n "${2:-}" ]] || usage
    kill_server "$2"
    rm -rf "$2"
    ;;
  *)
    usage
    ;;
esac
