#!/usr/bin/env bash
# Runs the example end to end: a throw-away etcd, the target and the initiator, then cleanup.
#   examples/etcd/run.sh [path/to/nixl_etcd_pair]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-./nixl_etcd_pair}
dir=$(mktemp -d /tmp/nixl-etcd-example-XXXXXX)
trap '"$here/../../scripts/etcd-test-server.sh" stop "$dir/etcd"' EXIT
rc=0
endpoint=$("$here/../../scripts/etcd-test-server.sh" start "$dir/etcd") || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "cannot start etcd (exit $rc)" >&2
  exit "$rc"  # 77: no etcd binary, a skip for CTest
fi
export NIXL_ETCD_ENDPOINTS=$endpoint
export NIXL_ETCD_NAMESPACE=/nixl-example/$$
echo "etcd at $NIXL_ETCD_ENDPOINTS, namespace $NIXL_ETCD_NAMESPACE"
# The initiator starts first on purpose: its fetch waits for the target to publish.
"$bin" initiator &
init=$!
sleep 0.5
"$bin" target
wait "$init"
echo "example passed"
