# Sourced by scripts that keep sandbox hosts (sandbox.sh) for their whole run, such as the
# benchmarks of bench/nixl-bench:
#   source tests/multihost/sandbox-lib.sh
#   sandbox_start N [TAG]    # hosts 0..N-1 under a fresh /tmp/TAG.XXXXXX ($sandbox_dir),
#                            # torn down when the script exits; SANDBOX_* settings pass through
#   in_host I CMD...         # runs CMD inside host I
sandbox_sh=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/sandbox.sh
sandbox_start() {
  sandbox_dir=$(mktemp -d "/tmp/${2:-nixl-sandbox}.XXXXXX")
  trap 'SANDBOX_OWNER=$$ "$sandbox_sh" down "$sandbox_dir/sb" || true; rm -rf "$sandbox_dir"' \
    EXIT INT TERM
  SANDBOX_OWNER=$$ "$sandbox_sh" up "$sandbox_dir/sb" "$1" >/dev/null
}
in_host() {
  local h=$1
  shift
  "$sandbox_sh" exec "$sandbox_dir/sb" "$h" "$@"
}
