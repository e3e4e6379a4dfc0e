#!/usr/bin/env bash
# GDS and GDS_MT on a GPU machine, in one command:
#   scripts/gds-check.sh
# 1. Builds like scripts/gpu-check.sh (CUDA, GDS, tests, and nixl-bench where UCX, CLI11 and
#    nlohmann-json are found), in $BUILD (default /tmp/nixl-gds-build).
# 2. cuFile in compatibility mode (no nvidia-fs): CUFILE_ENV_PATH_JSON names the project's
#    scripts/gds/cufile.json (allow_compat_mode, enough POSIX bounce buffers for the entries the
#    default batch pool keeps in flight); cuFile's log goes to $OUT/cufile.log. Without /run/udev, cuFile refuses
#    every file handle (5027): a udev record of the block device holding $GDS_DIR is written
#    only where it is missing, and removed when the script ends.
# 3. Tests: nixl_gds_abi_check (the backends' cuFile declarations against cufile.h),
#    nixl_gds_tests (the fake libcufile), nixl_gds_gpu_tests (VRAM and DRAM <-> file with the
#    real libcufile, 1 and 1000 descriptors, 4 KiB to 256 MiB, O_DIRECT and buffered, errors).
# 4. Benchmarks: nixl-bench --backend GDS and GDS_MT (8 threads), VRAM -> FILE, WRITE and READ,
#    each point next to direct cuFileWrite/cuFileRead of the same blocks in the same run
#    (--baseline cufile), and a table with the ratios and the goal (>= 0.9x from 1 MiB).
# Exit code: that of the first failing test or run (GPU tests that skip count as failing);
# GOAL_STRICT=1 also fails when a point from 1 MiB is below 0.9x of the baseline.
# Environment: GDS_DIR (default /tmp; ext4 or xfs, not tmpfs), BUILD, OUT, JOBS, ARCH, QUICK=1
# (4 KiB..64 MiB, fewer iterations), SKIP_TESTS=1 (with NIXL_BENCH set: no build either), SKIP_BENCH=1, NIXL_UCX_PREFIX, EXTRA_CMAKE_ARGS,
# NIXL_CUFILE_PATH (libcufile to load; default: found by the loader or under /usr/local/cuda),
# BENCH_EXTRA (more nixl-bench arguments for every run, after the sweep's (a later one wins),
# split at spaces, e.g.
# "--backend_params compat_chunk_size=1048576" or "--start_block_size 1M"), GDS_MT_THREADS (8),
# BENCH_BACKENDS ("GDS GDS_MT").
# The backends see cuFile's compatibility mode where /sys/module/nvidia_fs is absent
# (NIXL_GDS_COMPAT_MODE=0/1 overrides it; docs/gds.md, "Chunk size and compatibility mode").
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib.sh"
BUILD=${BUILD:-/tmp/nixl-gds-build}
OUT=${OUT:-$BUILD/out}
ARCH=${NIXL_CUDA_ARCHITECTURES:-${ARCH:-90}}
JOBS=${JOBS:-$(nproc)}
GDS_DIR=${GDS_DIR:-/tmp}
mkdir -p "$BUILD" "$OUT"
nixl_gpu_build_env

# ---- what the machine has ------------------------------------------------------------------
{
  nvidia-smi; nvcc --version; cmake --version
  echo "GDS_DIR=$GDS_DIR: $(findmnt -no SOURCE,FSTYPE -T "$GDS_DIR" 2>/dev/null)"
  lsmod 2>/dev/null | grep -i nvidia_fs || echo "nvidia-fs: not loaded (cuFile compatibility mode)"
  ls -l /usr/local/cuda/targets/*/lib/libcufile* 2>/dev/null
} >"$OUT/gpu-info.txt" 2>&1
fstype=$(findmnt -no FSTYPE -T "$GDS_DIR" 2>/dev/null | head -1)
[ -n "$fstype" ] || fstype=$(df --output=fstype "$GDS_DIR" 2>/dev/null | tail -1)
case $fstype in
  tmpfs|ramfs) echo "GDS_DIR=$GDS_DIR is on $fstype, which cuFile cannot use; set GDS_DIR to an ext4 or xfs folder"; exit 1 ;;
esac

# ---- libcufile -------------------------------------------------------------------------------
if [ -z "${NIXL_CUFILE_PATH:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcufile\.so\.0'; then
  for f in /usr/local/cuda/targets/*/lib/libcufile.so.0 /usr/local/cuda*/lib64/libcufile.so.0; do
    if [ -e "$f" ]; then
      export NIXL_CUFILE_PATH=$f
      export LD_LIBRARY_PATH="$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      break
    fi
  done
fi
echo "libcufile: ${NIXL_CUFILE_PATH:-libcufile.so.0 (found on the loader path)}" | tee -a "$OUT/gpu-info.txt"

# ---- cuFile configuration: compatibility mode with enough bounce buffers ---------------------
export CUFILE_ENV_PATH_JSON="$ROOT/scripts/gds/cufile.json"
export CUFILE_LOGFILE_PATH="$OUT/cufile.log"
echo "cuFile config: $CUFILE_ENV_PATH_JSON, log: $CUFILE_LOGFILE_PATH"

# ---- the udev record cuFile looks for, only where missing, removed at exit --------------------
created=()
created_dirs=()
cleanup() {
  for f in "${created[@]}"; do rm -f "$f"; done
  for ((i = ${#created_dirs[@]} - 1; i >= 0; i--)); do rmdir "${created_dirs[$i]}" 2>/dev/null; done
  [ ${#created[@]} -gt 0 ] && echo "removed the udev records this script wrote: ${created[*]}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # exit runs the EXIT trap: the records go
add_record() {  # $1: major:minor
  local f=/run/udev/data/b$1
  [ -e "$f" ] && { echo "udev record $f exists; left as it is"; return; }
  for d in /run/udev /run/udev/data; do
    if [ ! -d "$d" ]; then
      mkdir "$d" 2>/dev/null || { echo "cannot create $d (run as root); cuFile may refuse files with 5027"; return; }
      created_dirs+=("$d")
    fi
  done
  if printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "${fstype:-ext4}" >"$f" 2>/dev/null; then
    created+=("$f")
    echo "udev record $f written (ID_FS_TYPE=${fstype:-ext4})"
  else
    echo "cannot write $f (run as root); cuFile may refuse files with 5027"
  fi
}
dev=$(stat -c %d "$GDS_DIR")
maj=$((dev >> 8 & 0xfff))
min=$((dev & 0xff | (dev >> 12 & 0xfff00)))
add_record "$maj:$min"
src=$(findmnt -no SOURCE -T "$GDS_DIR" 2>/dev/null)
parent=$( [ -n "$src" ] && lsblk -no PKNAME "$src" 2>/dev/null | head -1)
if [ -n "$parent" ]; then
  pm=$(lsblk -dno MAJ:MIN "/dev/$parent" 2>/dev/null | tr -d ' ')
  [ -n "$pm" ] && add_record "$pm"
fi

# ---- build ------------------------------------------------------------------------------------
configure_full() {  # $1: UCX ON/OFF, $2: metadata ON/OFF
  cmake -S "$ROOT" -B "$BUILD/full" $GEN -DCMAKE_BUILD_TYPE=Release \
    -DNIXL_WITH_CUDA=ON -DNIXL_WITH_GDS=ON -DNIXL_WITH_UCX="$1" -DNIXL_WITH_POSIX=ON \
    -DNIXL_WITH_METADATA="$2" -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_PYTHON=OFF \
    -DNIXL_BUILD_TESTS=ON -DNIXL_BUILD_BENCH=ON -DNIXL_CUDA_ARCHITECTURES="$ARCH" ${EXTRA_CMAKE_ARGS:-}
}
configure_alone() {  # the GDS backends and their tests
  nixl_configure_alone nixl_gds_check backends/gds:gds tests/backends/gds:gds-tests
}
abi="not built"
if [ "${SKIP_TESTS:-0}" = 1 ] && [ -n "${NIXL_BENCH:-}" ]; then
  # benchmarks alone with a given nixl-bench (e.g. a packed one): nothing to build
  echo "build skipped: SKIP_TESTS=1 and NIXL_BENCH=$NIXL_BENCH"
else
  nixl_configure GDS
  has() { nixl_has_target "$1"; }
  targets="nixl_gds_tests nixl_fake_cufile"
  for t in nixl_gds_gpu_tests nixl_gds_baseline nixl-bench; do has $t && targets="$targets $t"; done
  nixl_build $targets
  abi="not built (no cufile.h found)"
  if has nixl_gds_abi_check; then
    if cmake --build "$B" -j "$JOBS" --target nixl_gds_abi_check >"$OUT/abi.log" 2>&1; then
      abi="ok"
    else
      abi="FAILED (see abi.log)"; grep -E 'error' "$OUT/abi.log" | head -20
    fi
  fi
fi
find_bin() { nixl_find_bin "$1"; }

# ---- tests ------------------------------------------------------------------------------------
rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== cuFile ABI check: $abi"
  [ "$abi" = ok ] && "$(find_bin nixl_gds_abi_check)" | tee -a "$OUT/abi.log"
  [[ $abi == FAILED* ]] && rc=1
  t=$(find_bin nixl_gds_tests)
  timeout 900 "$t" --durations yes >"$OUT/fake-tests.log" 2>&1; r=$?
  grep -E 'FAILED|passed|failed' "$OUT/fake-tests.log" | tail -8
  echo "== GDS tests against the fake libcufile: exit code $r"
  [ $r -ne 0 ] && rc=$r
  g=$(find_bin nixl_gds_gpu_tests)
  if [ -n "$g" ]; then
    # bounded: cuFile in compatibility mode can block for good when it runs out of bounce buffers
    NIXL_GDS_TEST_DIR=$GDS_DIR timeout 1800 "$g" --durations yes >"$OUT/gpu-tests.log" 2>&1; r=$?
    [ $r -eq 124 ] && echo "GDS GPU tests: timed out after 1800 s (a hang in cuFile? see $OUT/cufile.log)"
    grep -E 'SKIPPED|FAILED|passed|failed|^[0-9.]+ s: gds gpu' "$OUT/gpu-tests.log" | tail -40
    echo "== GDS GPU tests (libcufile, VRAM and DRAM <-> file): exit code $r"
    grep -q SKIPPED "$OUT/gpu-tests.log" && { echo "GPU tests skipped: see gpu-tests.log"; rc=1; }
    [ $r -ne 0 ] && rc=$r
  else
    echo "GDS GPU tests: not built (no CUDA toolkit found)"; rc=1
  fi
fi

# ---- benchmarks -------------------------------------------------------------------------------
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  NB=${NIXL_BENCH:-$(find_bin nixl-bench)}
  mkdir -p "$OUT/bench"
  if [ "${QUICK:-0}" = 1 ]; then
    sweep=(--start_block_size 4K --max_block_size 64M --num_iter 100 --warmup_iter 10 --large_blk_iter_ftr 4)
  else
    sweep=(--start_block_size 4K --max_block_size 256M --num_iter 400 --warmup_iter 40 --large_blk_iter_ftr 8)
  fi
  read -r -a bench_extra <<<"${BENCH_EXTRA:-}"
  echo "nvidia-fs: $([ -d /sys/module/nvidia_fs ] && echo loaded || echo 'not loaded: cuFile compatibility mode')" \
    "NIXL_GDS_COMPAT_MODE=${NIXL_GDS_COMPAT_MODE:-unset} BENCH_EXTRA=${BENCH_EXTRA:-}" | tee "$OUT/bench/setup.txt"
  if [ -n "$NB" ]; then
    for op in WRITE READ; do
      for be in ${BENCH_BACKENDS:-GDS GDS_MT}; do
        extra=()
        [ $be = GDS_MT ] && extra=(--gds_mt_num_threads "${GDS_MT_THREADS:-8}")
        name=$(echo "$be-$op" | tr 'A-Z_' 'a-z-')
        {
          echo "\$ uptime: $(uptime)"
          echo "\$ nixl-bench --backend $be ${extra[*]} --initiator_seg_type VRAM --target_seg_type FILE --op_type $op --filepath $GDS_DIR --baseline cufile --check_consistency ${sweep[*]} ${bench_extra[*]}"
          timeout 1200 "$NB" --backend $be "${extra[@]}" --initiator_seg_type VRAM --target_seg_type FILE \
            --op_type $op --filepath "$GDS_DIR" --baseline cufile --check_consistency "${sweep[@]}" "${bench_extra[@]}" \
            --csv "$OUT/bench/$name.csv"
        } >"$OUT/bench/$name.txt" 2>&1
        r=$?
        echo "== nixl-bench $be $op (rc $r): $OUT/bench/$name.txt"
        [ $r -ne 0 ] && { tail -5 "$OUT/bench/$name.txt"; rc=$r; }
      done
    done
    python3 - "$OUT/bench" <<'PY' | tee "$OUT/bench/summary.txt"
import csv, os, sys
d = sys.argv[1]
rows = {}
for be in ("GDS", "GDS_MT"):
    for op in ("WRITE", "READ"):
        f = os.path.join(d, f"{be}-{op}".lower().replace("_", "-") + ".csv")
        if not os.path.exists(f):
            continue
        for r in csv.DictReader(open(f)):
            rows[(op, int(r["block_size"]), be)] = r
blocks = sorted({k[1] for k in rows})
if not rows:
    print("no nixl-bench results: see the .txt files next to this summary")
    sys.exit(2)
print("VRAM <-> FILE, GB/s (1e9 B/s); base: direct cuFileWrite/cuFileRead of the same blocks in the same run")
print(f"{'op':<6}{'block':>11}{'GDS':>9}{'base':>9}{'ratio':>7}{'GDS_MT':>9}{'base':>9}{'ratio':>7}  goal")
bad = 0
for op in ("WRITE", "READ"):
    for b in blocks:
        g, m = rows.get((op, b, "GDS")), rows.get((op, b, "GDS_MT"))
        if not g and not m:
            continue
        def cols(r):
            if not r:
                return f"{'-':>9}{'-':>9}{'-':>7}", None
            ratio = float(r["ratio"]) if r["ratio"] else None
            return f"{float(r['gbps']):>9.2f}{float(r['baseline_gbps']):>9.2f}{(f'{ratio:.2f}' if ratio else '-'):>7}", ratio
        gc, gr = cols(g)
        mc, mr = cols(m)
        goal = ""
        if b >= (1 << 20):
            ran = [x for x, r in ((gr, g), (mr, m)) if r]
            ok = all(x is not None and x >= 0.9 for x in ran)
            goal = "ok" if ok else "BELOW 0.9x"
            bad += 0 if ok else 1
        print(f"{op:<6}{b:>11}{gc}{mc}  {goal}")
print(f"points from 1 MiB below 0.9x: {bad}" + ("" if bad == 0 else "  (GOAL NOT MET)"))
sys.exit(1 if bad else 0)
PY
    goal=${PIPESTATUS[0]}
    if [ "$goal" -ne 0 ] && [ "${GOAL_STRICT:-0}" = 1 ]; then rc=$goal; fi
  else
    echo "nixl-bench: not built (needs UCX, CLI11 and nlohmann-json); the direct baseline alone:"
    bl=$(find_bin nixl_gds_baseline)
    for op in WRITE READ; do
      [ -n "$bl" ] && "$bl" --dir "$GDS_DIR" --mem VRAM --op $op "${sweep[@]}" | tee "$OUT/bench/baseline-$op.csv"
    done
  fi
fi
echo "logs: $OUT"
exit $rc
