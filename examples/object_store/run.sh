#!/usr/bin/env bash
# Runs the example end to end against a throw-away local store, then stops it:
#   examples/object_store/run.sh s3|azure [path/to/nixl_kv_offload]
# s3: s3rver, configured through AWS_* variables as for AWS; azure: azurite, through
# AZURE_STORAGE_CONNECTION_STRING (azurite's shorthand, with this server's port).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
store=${1:?usage: run.sh s3|azure [nixl_kv_offload]}
bin=${2:-./nixl_kv_offload}
dir=$(mktemp -d /tmp/nixl-obj-example-XXXXXX)
trap '"$here/../../scripts/obj-test-server.sh" stop "$dir/srv" >/dev/null 2>&1; rm -rf "$dir"' EXIT
rc=0
endpoint=$("$here/../../scripts/obj-test-server.sh" start "$store" "$dir/srv") || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "cannot start the $store server (exit $rc)" >&2
  exit "$rc"  # 77: node or the server not installed, a skip for CTest
fi
echo "$store server at $endpoint"
if [[ $store == s3 ]]; then
  # s3rver's bucket and credentials (scripts/obj-test-server.sh)
  AWS_ENDPOINT_OVERRIDE=http://$endpoint AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
    AWS_DEFAULT_BUCKET=nixl-test "$bin" s3 "example-$$"
else
  AZURE_STORAGE_CONNECTION_STRING="UseDevelopmentStorage=true;BlobEndpoint=http://$endpoint/devstoreaccount1" \
    NIXL_CONTAINER=kv-cache "$bin" azure "example-$$" --create
fi
echo "example passed"
