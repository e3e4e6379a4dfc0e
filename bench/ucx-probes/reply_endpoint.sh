#!/usr/bin/env bash
# Builds reply_endpoint.cpp against a UCX prefix and counts, per UCX_TLS, the runs in which the
# answer arrived (docs/ucx.md, "Copy requests"):
#   bench/ucx-probes/reply_endpoint.sh [UCX prefix, default /opt/nixl/ucx-1.22.0; /usr: Debian's]
#   RUNS=N (default 10)   TLS="tcp shm" (default)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:-/opt/nixl/ucx-1.22.0}
bin=$(mktemp -d)/reply_endpoint
trap 'rm -rf "$(dirname "$bin")"' EXIT
g++ -O1 -std=c++20 "$here/reply_endpoint.cpp" -I"$prefix/include" -L"$prefix/lib" \
  -Wl,-rpath,"$prefix/lib" -lucp -lucs -pthread -o "$bin"
for tls in ${TLS:-tcp shm}; do
  ok=0
  for _ in $(seq "${RUNS:-10}"); do
    UCX_TLS=$tls timeout 10 "$bin" >/dev/null 2>&1 && ok=$((ok + 1))
  done
  echo "UCX at $prefix, UCX_TLS=$tls: the answer arrived in $ok of ${RUNS:-10} runs"
done
