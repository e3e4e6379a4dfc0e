#!/usr/bin/env bash
# Installs what building and testing nixl-cpp needs on Debian 12 (idempotent, non-interactive).
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev clang-format ccache
  libfmt-dev catch2 libbenchmark-dev libcli11-dev
  libucx-dev ucx-utils liburing-dev libaio-dev libibverbs-dev librdmacm-dev
  etcd-server libcurl4-openssl-dev nlohmann-json3-dev
  pybind11-dev python3-dev python3-numpy python3-pytest python3-torch
  libssl-dev iproute2 util-linux curl
  python3-setuptools python3-wheel python3-pip
  libcpp-httplib-dev
  fio iperf3 gnuplot-nox procps
  libfabric-dev libfabric-bin
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# UCX 1.22 (with its CUDA transports when the CUDA toolkit is found) into a prefix of its own,
# which CMake finds by default; skipped when that prefix holds it already (scripts/build-ucx.sh).
"$(dirname "$0")/build-ucx.sh"
# UCX 1.22's contrib/ibmock (a libibverbs/libefa faking EFA devices in one process) into
# /opt/nixl/ibmock, for the UCX backend's tests over ud and srd (scripts/build-ibmock.sh).
"$(dirname "$0")/build-ibmock.sh"

# Node with s3rver and azurite (pinned, in /opt/nixl/node), the servers of the object store tests.
"$(dirname "$0")/install-obj-servers.sh"
