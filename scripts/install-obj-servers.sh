#!/usr/bin/env bash
# Installs the object store servers the OBJ and AZURE_BLOB tests start (s3rver, azurite) from npm,
# pinned, into NIXL_NODE_PREFIX (default /opt/nixl/node); Node itself from Debian (nodejs, npm)
# unless a node and npm are on PATH already. Idempotent: skipped when the pinned versions are
# there. Called by scripts/install-deps.sh.
set -euo pipefail
prefix=${NIXL_NODE_PREFIX:-/opt/nixl/node}
s3rver_version=3.7.1    # the last release; works with Debian 12's Node 18
azurite_version=3.35.0  # the last release that runs on Node < 22

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "installing: nodejs npm"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi

installed() {  # installed <package> <version>
  local f=$prefix/node_modules/$1/package.json
  [[ -f $f ]] && grep -q "\"version\": \"$2\"" "$f"
}
if installed s3rver "$s3rver_version" && installed azurite "$azurite_version"; then
  exit 0
fi
echo "installing into $prefix: s3rver@$s3rver_version azurite@$azurite_version"
$SUDO mkdir -p "$prefix"
$SUDO npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
  "s3rver@$s3rver_version" "azurite@$azurite_version"
