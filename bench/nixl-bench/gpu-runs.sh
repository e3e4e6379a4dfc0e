#!/usr/bin/env bash
# The nixl-bench runs behind docs/performance.md ("CUDA backend and UCX") and docs/cuda.md /
# docs/ucx.md, on a machine with two GPUs (GPU 0 -> GPU 1, two processes unless noted), one after
# another, each preceded by the machine's load. Every point's data is checked; the cuda baseline
# (cudaMemcpyPeerAsync between the same GPUs, synchronised) runs in the same run.
#   bench/nixl-bench/gpu-runs.sh path/to/nixl-bench [out-dir] [which...]
# which: cuda modes ucx staging bulk (default: all but bulk). UCX settings come from the
# environment; TARGET_GPU (default 1) is the target's GPU (0 on a one-GPU machine).
set -uo pipefail
bin=${1:?path of nixl-bench}
out=${2:-/tmp/nixl-bench-gpu}
shift $(($# >= 2 ? 2 : $#))
which=${*:-cuda modes ucx staging}
tgt=${TARGET_GPU:-1}
mkdir -p "$out"
run() {
  local name=$1
  shift
  {
    echo "\$ uptime: $(uptime)"
    echo "\$ ${RUN_ENV:-}nixl-bench $*"
    env ${RUN_ENV:-} "$bin" "$@" --csv "$out/$name.csv"
  } >"$out/$name.txt" 2>&1
  echo "== $name (rc $?)"
  grep -vE '^\$|^$' "$out/$name.txt" | cut -c1-160 | tail -n +1
}
gpus=(--processes 2 --initiator_seg_type VRAM --target_seg_type VRAM --initiator_gpu 0
      --target_gpu "$tgt" --check_consistency --warmup_iter 20 --large_blk_iter_ftr 4)
big=(--start_block_size 64K --max_block_size 256M --num_iter 200)
small=(--start_block_size 4K --max_block_size 4K --start_batch_size 64 --max_batch_size 64
       --scatter --num_iter 2000)
for w in $which; do
  case $w in
    cuda)
      # The CUDA backend across processes: large single copies, 64 scattered 4 KiB blocks per
      # request, READ, and the same pair of GPUs within one process.
      run cuda-write --backend CUDA "${gpus[@]}" "${big[@]}" --op_type WRITE
      run cuda-small --backend CUDA "${gpus[@]}" "${small[@]}" --op_type WRITE
      run cuda-read --backend CUDA "${gpus[@]}" "${big[@]}" --op_type READ
      run cuda-one-process --backend CUDA "${gpus[@]}" "${big[@]}" --op_type WRITE --processes 1
      ;;
    modes)
      # The four request modes, 16 descriptors, one process, GPU 0 -> GPU 0.
      modes=(--backend CUDA --initiator_seg_type VRAM --target_seg_type VRAM --processes 1
             --start_block_size 4K --max_block_size 1M --start_batch_size 16
             --max_batch_size 16 --num_iter 200 --warmup_iter 20 --check_consistency)
      run cuda-repost "${modes[@]}" --xfer_mode repost
      run cuda-recreate "${modes[@]}" --xfer_mode recreate
      run cuda-prepared "${modes[@]}" --xfer_mode prepared
      run cuda-scatter "${modes[@]}" --xfer_mode repost --scatter
      ;;
    ucx)
      # UCX with its cuda_ipc transport (UCX_TLS unset: UCX picks).
      run ucx-write --backend UCX "${gpus[@]}" "${big[@]}" --op_type WRITE
      run ucx-read --backend UCX "${gpus[@]}" "${big[@]}" --op_type READ
      run ucx-small --backend UCX "${gpus[@]}" "${small[@]}" --op_type WRITE
      # Without progress threads: both processes poll their workers themselves.
      run ucx-write-no-pt --backend UCX "${gpus[@]}" "${big[@]}" --op_type WRITE --enable_pt false
      ;;
    staging)
      # Two nodes without RDMA move GPU memory over TCP, staged through host memory by
      # cuda_copy; here both processes share one host and talk over loopback. Baseline: the
      # same UCX moving DRAM -> DRAM over TCP.
      st=(--backend UCX --processes 2 --op_type WRITE --start_block_size 64K
          --max_block_size 16M --num_iter 100 --warmup_iter 10 --large_blk_iter_ftr 4
          --check_consistency)
      RUN_ENV="UCX_TLS=tcp " run tcp-dram "${st[@]}" --baseline none
      RUN_ENV="UCX_TLS=tcp,cuda_copy " run tcp-vram "${st[@]}" --initiator_seg_type VRAM \
        --target_seg_type VRAM --target_gpu 1 --baseline none
      # The target polling its worker instead of a progress thread.
      RUN_ENV="UCX_TLS=tcp,cuda_copy " run tcp-vram-no-pt "${st[@]}" --initiator_seg_type VRAM \
        --target_seg_type VRAM --target_gpu 1 --baseline none --enable_pt false
      RUN_ENV="UCX_TLS=tcp " run tcp-dram-no-pt "${st[@]}" --baseline none --enable_pt false
      # STAGING_VARIANTS: more UCX settings, e.g. UCX_RMA_PPLN_ENABLE=n (software emulation, as
      # before UCX 1.22) or UCX_RNDV_FRAG_SIZE=host:4M; commas separate variables of one run.
      for v in ${STAGING_VARIANTS:-}; do
        RUN_ENV="UCX_TLS=tcp,cuda_copy ${v//,/ } " run "tcp-vram-${v//[^a-zA-Z0-9]/_}" "${st[@]}" \
          --initiator_seg_type VRAM --target_seg_type VRAM --target_gpu 1 --baseline none
      done
      ;;
    bulk)
      # One request of 65,536 VRAM blocks of 16 KiB (1 GiB), two processes: contiguous blocks
      # (merged into one copy) and scattered ones (every other 16 KiB), UCX and CUDA backends.
      bk=(--processes 2 --initiator_seg_type VRAM --target_seg_type VRAM --initiator_gpu 0
          --target_gpu "$tgt" --start_block_size 16K --max_block_size 16K --num_iter 10
          --warmup_iter 2 --start_batch_size 65536 --max_batch_size 65536 --check_consistency)
      for b in UCX CUDA; do
        run "bulk-${b,,}" --backend "$b" "${bk[@]}" --total_buffer_size 1G
        run "bulk-${b,,}-scatter" --backend "$b" "${bk[@]}" --total_buffer_size 2G --scatter
      done
      ;;
  esac
done
