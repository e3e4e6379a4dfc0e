#!/usr/bin/env bash
# Runs the UCX backend's in-process DRAM tests over one of UCX's verbs transports, on the fake EFA
# devices of UCX 1.22's contrib/ibmock (scripts/build-ibmock.sh):
#   ibmock.sh <nixl_ucx_tests> <ud|srd> <UCX module folder> <UCX version>
# Exit 77 (skipped) when ibmock is not built, the UCX is older than 1.22 (whose EFA devices
# ibmock fakes) or lacks the module of that transport.
# NIXL_IBMOCK_DIR: the ibmock prefix (default /opt/nixl/ibmock).
set -euo pipefail
bin=$1 tl=$2 mods=$3 ver=$4
lib=${NIXL_IBMOCK_DIR:-/opt/nixl/ibmock}/lib
case $tl in
  ud) mod=libuct_ib.so expect=ud_verbs ;;
  srd) mod=libuct_ib_efa.so expect=srd ;;
  *) echo "ibmock.sh: transport ud or srd, not '$tl'" >&2; exit 2 ;;
esac
if [[ ! -f $lib/libibverbs.so.1 || ! -f $lib/libefa.so.1 ]]; then
  echo "skipped: ibmock is not built in $lib (scripts/build-ibmock.sh)"
  exit 77
fi
if [[ $(printf '%s\n' 1.22 "$ver" | sort -V | head -1) != 1.22 ]]; then
  echo "skipped: UCX $ver; the ibmock tests need UCX 1.22 or later (its efa module, srd)"
  exit 77
fi
if [[ ! -f $mods/$mod ]]; then
  echo "skipped: the UCX of this build has no $mod in $mods (UCX 1.22 built with rdma-core:" \
    "scripts/build-ucx.sh)"
  exit 77
fi

# The in-process DRAM cases: registration, remote keys, put/get, notifications, loopback, repost
# and release, through the backend alone and through agents; and the [ibmock] case, which checks
# that every lane of the endpoints is on `expect`.
cases=(
  "[ibmock]"
  "ucx registration refuses what it cannot move"
  "ucx rejects malformed peer data"
  "ucx loopback write and read"
  "ucx two backends in one process: many descriptors*"
  "ucx refuses descriptors outside their regions"
  "ucx agents: notifications with and without data*"
  "ucx agents: loopback*"
  "ucx agents: memory allocated by UCX moves like any other"
)
# 64 MiB transfers, over ud only: ibmock drops a packet that finds no posted receive buffer
# (real SRD hardware retries it). UCX's ud retransmits; its srd relies on the hardware and does
# not, so a fragment ibmock drops is lost and the transfer never ends.
if [[ $tl == ud ]]; then
  cases+=(
    "ucx release of a request in flight"
    "ucx agents: READ and WRITE from 1 B to 64 MiB*"
    "ucx agents: repost*"
  )
fi
# each name must still name a test (no commas: they separate names in a Catch2 spec), so that a
# renamed case fails here instead of silently not running
for c in "${cases[@]}"; do
  n=$("$bin" --list-test-names-only "$c" | grep -c . || true)
  [[ $n -ge 1 ]] || { echo "ibmock.sh: no test case matches '$c'" >&2; exit 1; }
done
spec=$(IFS=,; echo "${cases[*]}")

# UCX lists an IB device only when /dev/infiniband/<its uverbs name> is a character device it
# may open; ibmock's are uverbs0 and uverbs1. Where they do not exist (no RDMA here), the test
# runs in a mount namespace of its own whose /dev is a copy of the real one (bind mounts) plus
# /dev/infiniband/uverbs0 and uverbs1 bound to /dev/null; nothing outside it changes.
if [[ ! -c /dev/infiniband/uverbs0 || ! -c /dev/infiniband/uverbs1 ]]; then
  if [[ ${NIXL_IBMOCK_NS:-0} != 1 ]]; then
    unshare --mount --propagation private true 2>/dev/null || {
      echo "skipped: no /dev/infiniband/uverbs0 and no mount namespace to fake it in (needs root)"
      exit 77
    }
    exec unshare --mount --propagation private env NIXL_IBMOCK_NS=1 "$0" "$@"
  fi
  old=$(mktemp -d /tmp/nixl-ibmock-dev.XXXXXX)
  mount --rbind /dev "$old"
  mount -t tmpfs -o mode=755,size=1m nixl-ibmock-dev /dev
  for e in "$old"/*; do
    n=${e##*/}
    if [[ $n == infiniband ]]; then
      continue # below, a folder of its own: files made in it must not reach the real one
    elif [[ -L $e ]]; then
      cp -P "$e" "/dev/$n"
    elif [[ -d $e ]]; then
      mkdir "/dev/$n" && mount --rbind "$e" "/dev/$n"
    else
      touch "/dev/$n" && mount --bind "$e" "/dev/$n"
    fi
  done
  mkdir /dev/infiniband
  for e in "$old"/infiniband/*; do
    [[ -e $e && ! -d $e ]] || continue
    touch "/dev/infiniband/${e##*/}" && mount --bind "$e" "/dev/infiniband/${e##*/}"
  done
  for d in uverbs0 uverbs1; do
    [[ -c /dev/infiniband/$d ]] ||
      { touch "/dev/infiniband/$d" && mount --bind "$old/null" "/dev/infiniband/$d"; }
  done
  umount -l "$old" && rmdir "$old"
fi

export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_TLS=$tl NIXL_UCX_EXPECT_TL=$expect
echo "UCX_TLS=$UCX_TLS over ibmock ($lib): ${#cases[@]} test cases"
exec "$bin" "$spec"
