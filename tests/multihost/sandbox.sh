#!/usr/bin/env bash
# Sandbox hosts for multi-host tests: N "hosts" on this machine, each with its own network, IPC,
# PID, UTS and mount namespace (and a private /dev/shm), joined by a bridge that lives in a
# namespace of its own. Addresses 10.77.0.1 .. 10.77.0.N (/24), loopback up, no default route and
# no link to the root namespace: no packet can leave the sandbox.
#
#   sandbox.sh up DIR N          # creates hosts 0..N-1; DIR records them (prints the addresses)
#   sandbox.sh exec DIR I CMD..  # runs CMD inside host I (stdin/stdout/stderr pass through)
#   sandbox.sh pid DIR I         # the host's init process (pid 1 of its PID namespace), as seen here
#   sandbox.sh destroy DIR I     # kills every process of host I and removes its namespaces
#   sandbox.sh link DIR I up|down  # sets host I's interface up or down (a cable pulled, put back)
#   sandbox.sh down DIR          # tears everything down and removes DIR (idempotent)
#   sandbox.sh sweep             # removes namespaces left by runs whose owner is gone
#   sandbox.sh addr I            # the address of host I
#   sandbox.sh addr2 I           # the address of host I on the second link (SANDBOX_LINKS=2)
#
# Exit status 77 from `up` means "cannot create namespaces here" (not root, or no ip/unshare):
# callers treat it as a skip and print the reason from stderr.
#
# Settings of `up` (environment): SANDBOX_OWNER, the pid whose death makes the namespaces stale
# (default: the caller); SANDBOX_IFNAME, the hosts' interface name (default eth0);
# SANDBOX_STALE_SYS=1 enters the network namespace with `nsenter --net` instead of
# `ip netns exec`, so /sys stays the root namespace's (a set-up some containers have);
# SANDBOX_LINKS=2 gives every host a second link (SANDBOX_IFNAME2, default eth1) on a second
# bridge, 10.78.0.1 .. 10.78.0.N: two NICs per host, for striping over rails.
set -euo pipefail

prefix=nixlmh
subnet=10.77.0
# The hosts' interface name (eth0, as in most containers).
ifname=${SANDBOX_IFNAME:-eth0}

die() {
  echo "sandbox: $*" >&2
  exit 1
}

addr() { echo "$subnet.$(($1 + 1))"; }
subnet2=10.78.0
ifname2=${SANDBOX_IFNAME2:-eth1}
links=${SANDBOX_LINKS:-1}
addr2() { echo "$subnet2.$(($1 + 1))"; }

# Namespaces are named <prefix>-<owner pid>-<random>-<host>; "sw" is the bridge's namespace.
ns_of() { echo "$(cat "$1/id")-$2"; }

sweep() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-" || true); do
    pid=${ns#"$prefix"-}
    pid=${pid%%-*}
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
      continue # its owner still runs
    fi
    kill_ns_procs "$ns"
    ip netns del "$ns" 2>/dev/null || true
  done
}

# Kills every process whose network namespace is the named one.
kill_ns_procs() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
  return 0
}

host_pid() { cat "$1/host$2.pid"; }

enter() {
  local dir=$1 i=$2
  shift 2
  local pid
  pid=$(host_pid "$dir" "$i")
  [[ -d /proc/$pid ]] || die "host $i of $dir is not running"
  exec nsenter -t "$pid" -n -m -i -u -p --wd="$PWD" -- "$@"
}

up() {
  local dir=$1 n=$2
  if [[ $EUID -ne 0 ]]; then
    echo "sandbox hosts need root (network and PID namespaces); running as uid $EUID" >&2
    exit 77
  fi
  for tool in ip unshare nsenter; do
    command -v "$tool" >/dev/null || {
      echo "sandbox hosts need '$tool' (iproute2 / util-linux)" >&2
      exit 77
    }
  done
  [[ "$n" =~ ^[0-9]+$ && $n -ge 2 && $n -le 8 ]] || die "host count '$n': use 2 to 8"
  sweep
  mkdir -p "$dir"
  # The owner (the test process, by default our parent) keeps the namespaces alive: a later
  # sweep removes them once it is gone, whatever killed it.
  local id="$prefix-${SANDBOX_OWNER:-$PPID}-$RANDOM"
  echo "$id" >"$dir/id"
  echo "$n" >"$dir/n"
  local sw="$id-sw"
  ip netns add "$sw" || {
    echo "cannot create network namespaces (ip netns add failed)" >&2
    exit 77
  }
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  if [[ $links == 2 ]]; then
    ip -n "$sw" link add br1 type bridge
    ip -n "$sw" link set br1 up
  fi
  for ((i = 0; i < n; i++)); do
    local ns="$id-$i"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The pair is born in the bridge's namespace and one end moves to the host: neither end
    # ever exists in the root namespace.
    ip -n "$sw" link add "h$i" type veth peer name "$ifname" netns "$ns"
    ip -n "$sw" link set "h$i" master br0
    ip -n "$sw" link set "h$i" up
    ip -n "$ns" addr add "$(addr "$i")/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    if [[ $links == 2 ]]; then
      ip -n "$sw" link add "g$i" type veth peer name "$ifname2" netns "$ns"
      ip -n "$sw" link set "g$i" master br1
      ip -n "$sw" link set "g$i" up
      ip -n "$ns" addr add "$(addr2 "$i")/24" dev "$ifname2"
      ip -n "$ns" link set "$ifname2" up
    fi
    # The host's init: pid 1 of a new PID namespace with its own IPC, UTS and mount namespaces,
    # /proc of its own (--mount-proc), /sys of its network namespace (ip netns exec) and a
    # private /dev/shm.
    local enter_net=(ip netns exec "$ns")
    [[ -n "${SANDBOX_STALE_SYS:-}" ]] && enter_net=(nsenter --net=/run/netns/"$ns")
    setsid "${enter_net[@]}" unshare --ipc --uts --pid --fork --mount-proc --kill-child \
      /bin/sh -c "hostname mh-host$i; mount -t tmpfs -o size=1g tmpfs /dev/shm;
                  touch /dev/shm/.ready; exec sleep infinity" </dev/null >/dev/null 2>&1 &
    local outer=$! inner=""
    for _ in $(seq 100); do
      inner=$(cat /proc/"$outer"/task/"$outer"/children 2>/dev/null | awk '{print $1}')
      if [[ -n "$inner" ]] &&
        [[ "$(nsenter -t "$inner" -m cat /dev/shm/.ready 2>/dev/null && echo ok)" == ok ]]; then
        break
      fi
      inner=""
      sleep 0.05
    done
    [[ -n "$inner" ]] || die "host $i did not start"
    echo "$inner" >"$dir/host$i.pid"
    echo "$outer" >"$dir/host$i.outer"
  done
  # wait for the links (and IPv4 DAD-free addresses) to be usable
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 100); do
      ip -n "$id-$i" -o link show "$ifname" | grep -q 'state UP' && break
      sleep 0.05
    done
    if [[ $links == 2 ]]; then
      for _ in $(seq 100); do
        ip -n "$id-$i" -o link show "$ifname2" | grep -q 'state UP' && break
        sleep 0.05
      done
    fi
  done
  for ((i = 0; i < n; i++)); do addr "$i"; done
}

destroy() {
  local dir=$1 i=$2
  local ns
  ns=$(ns_of "$dir" "$i")
  if [[ -f "$dir/host$i.pid" ]]; then
    kill -9 "$(host_pid "$dir" "$i")" 2>/dev/null || true # pid 1: the kernel kills the rest
  fi
  if [[ -f "$dir/host$i.outer" ]]; then kill -9 "$(cat "$dir/host$i.outer")" 2>/dev/null || true; fi
  kill_ns_procs "$ns"
  ip netns del "$ns" 2>/dev/null || true
  rm -f "$dir/host$i.pid" "$dir/host$i.outer"
}

# link DIR I up|down: host I's interface (both, with SANDBOX_LINKS=2), set from inside the
# host's network namespace; `up` returns once the kernel reports the link up again.
link() {
  local dir=$1 i=$2 state=$3 ns dev
  [[ $state == up || $state == down ]] || die "link state '$state': use up or down"
  ns=$(ns_of "$dir" "$i")
  for dev in $(ip -n "$ns" -o link show | awk -F': ' '$2 != "lo" {sub(/@.*/, "", $2); print $2}'); do
    ip -n "$ns" link set "$dev" "$state"
    if [[ $state == up ]]; then
      for _ in $(seq 100); do
        ip -n "$ns" -o link show "$dev" | grep -q 'state UP' && break
        sleep 0.05
      done
    fi
  done
}

down() {
  local dir=$1
  [[ -f "$dir/id" ]] || {
    rm -rf "$dir"
    return 0
  }
  local n i id
  n=$(cat "$dir/n")
  id=$(cat "$dir/id")
  for ((i = 0; i < n; i++)); do destroy "$dir" "$i"; done
  kill_ns_procs "$id-sw"
  ip netns del "$id-sw" 2>/dev/null || true
  rm -rf "$dir"
}

cmd=${1:-}
case "$cmd" in
  up) up "${2:?DIR}" "${3:?N}" ;;
  exec) enter "${2:?DIR}" "${3:?HOST}" "${@:4}" ;;
  pid) host_pid "${2:?DIR}" "${3:?HOST}" ;;
  destroy) destroy "${2:?DIR}" "${3:?HOST}" ;;
  link) link "${2:?DIR}" "${3:?HOST}" "${4:?up|down}" ;;
  down) down "${2:?DIR}" ;;
  sweep) sweep ;;
  addr) addr "${2:?HOST}" ;;
  addr2) addr2 "${2:?HOST}" ;;
  *)
    sed -n '2,17p' "$0" >&2
    exit 2
    ;;
esac
