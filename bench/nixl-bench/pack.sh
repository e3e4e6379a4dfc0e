#!/usr/bin/env bash
# Packs nixl-bench (and any more binaries given) with every shared library they load, the
# dynamic loader and UCX's transport modules into one folder. That folder runs on another
# x86-64 Linux machine that lacks those libraries, such as the GPU machine of
# docs/performance.md:
#   bench/nixl-bench/pack.sh build/nb-carry build/bench/nixl-bench/nixl-bench [nixl_micro_bench]
#   build/nb-carry/nixl-bench.sh --processes 2 ...          # on the other machine
#   build/nb-carry/doc-runs.sh build/nb-carry/nixl-bench.sh OUT ucx
#   build/nb-carry/lib/ld-linux-x86-64.so.2 --library-path build/nb-carry/lib \
#     build/nb-carry/nixl_micro_bench
set -euo pipefail
dest=${1:?destination folder}
shift
[[ $# -ge 1 ]] || { echo "usage: $0 DEST nixl-bench [more binaries]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest/lib" "$dest/ucx"
libs() { ldd "$1" | awk '/=>/ && $3 ~ /^\// {print $3}'; }
# UCX's transport modules sit beside the libucp that nixl-bench loads (its RPATH may point at
# /opt/nixl/ucx-1.22.0 rather than the system's UCX): take them from there.
ucp=$(ldd "$1" | awk '/libucp\.so/ && $3 ~ /^\// {print $3; exit}')
ucx_dir=""
[[ -n $ucp ]] && ucx_dir=$(dirname "$(readlink -f "$ucp")")/ucx
for bin in "$@"; do
  cp "$bin" "$dest/"
  for l in $(libs "$bin"); do cp -L "$l" "$dest/lib/"; done
done
if [[ -n $ucx_dir && -d $ucx_dir ]]; then
  echo "UCX modules from $ucx_dir ($(basename "$(readlink -f "$ucp")"))"
  cp -L "$ucx_dir"/*.so.0 "$dest/ucx/"
  for m in "$dest"/ucx/*.so.0; do
    for l in $(libs "$m"); do [[ -f $dest/lib/$(basename "$l") ]] || cp -L "$l" "$dest/lib/"; done
  done
fi
# libcufile (loaded at run time by the GDS backends, from the other machine) opens libmount and
# libudev itself; the other machine's copies may need a newer C library than the packed one (on
# the GPU machine cuFile then failed with "unable to load libmount.so.1"), so the packed loader
# gets this machine's.
for l in libmount.so.1 libblkid.so.1 libselinux.so.1 libpcre2-8.so.0 libudev.so.1; do
  f=$(ldconfig -p 2>/dev/null | awk -v n="$l" '$1 == n && /x86-64/ && f == "" {f = $NF} END {print f}')
  if [[ -n $f && ! -f $dest/lib/$l ]]; then cp -L "$f" "$dest/lib/"; fi
done
cp -L /lib64/ld-linux-x86-64.so.2 "$dest/lib/"
cp "$here/doc-runs.sh" "$here/perf-runs.sh" "$dest/"
cat > "$dest/nixl-bench.sh" <<'SH'
#!/usr/bin/env bash
d=$(cd "$(dirname "$0")" && pwd)
export UCX_MODULE_DIR=$d/ucx
exec "$d/lib/ld-linux-x86-64.so.2" --library-path "$d/lib" "$d/nixl-bench" "$@"
SH
chmod +x "$dest/nixl-bench.sh"
# bin/NAME runs each packed binary the same way, for a PATH of its own (multihost.sh calls
# iperf3 and ip by name): bench/nixl-bench/pack.sh DEST nixl-bench ucx_perftest iperf3 ip
mkdir -p "$dest/bin"
for bin in "$@"; do
  name=$(basename "$bin")
  cat >"$dest/bin/$name" <<SH
#!/usr/bin/env bash
d=\$(cd "\$(dirname "\$0")/.." && pwd)
export UCX_MODULE_DIR=\$d/ucx
exec "\$d/lib/ld-linux-x86-64.so.2" --library-path "\$d/lib" "\$d/$name" "\$@"
SH
  chmod +x "$dest/bin/$name"
done
du -sh "$dest"
