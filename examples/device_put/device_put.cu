// A kernel writes into another agent's GPU memory: two agents in one process (the CUDA
// backend), a local and a remote memory view (nixlAgent::prepMemView), then nixlPut and
// nixlAtomicAdd from a warp (NIXL's nixl_device.cuh). Exits 77 when there is no GPU.
// See docs/device.md.

#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nixl.h>
#include <nixl_device.cuh>

namespace {

__global__ void send(nixlMemViewH src, nixlMemViewH dst, size_t size, int* status) {
  // The payload: entry 0 of both views. The completion counter: entry 1 of the remote view.
  nixl_status_t s = nixlPut<nixl_gpu_level_t::WARP>({src, 0, 0}, {dst, 0, 0}, size);
  if (s == NIXL_IN_PROG) s = nixlAtomicAdd<nixl_gpu_level_t::WARP>(1, {dst, 1, 0});
  if (threadIdx.x == 0) *status = s;
}

bool ok(nixl_status_t s, const char* what) {
  if (s != NIXL_SUCCESS)
    std::fprintf(stderr, "%s: %s\n", what, nixlEnumStrings::statusStr(s).c_str());
  return s == NIXL_SUCCESS;
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no GPU: nothing to show\n");
    return 77;
  }
  constexpr size_t size = 1 << 20;
  char *src = nullptr, *dst = nullptr;
  unsigned long long* counter = nullptr;
  cudaMalloc(&src, size);
  cudaMalloc(&dst, size);
  cudaMalloc(&counter, sizeof *counter);
  cudaMemset(src, 0x5a, size);
  cudaMemset(dst, 0, size);
  cudaMemset(counter, 0, sizeof *counter);

  nixlAgent sender("sender", nixlAgentConfig(true)), receiver("receiver", nixlAgentConfig(true));
  nixlBackendH *bs = nullptr, *br = nullptr;
  if (!ok(sender.createBackend("CUDA", {}, bs), "createBackend") ||
      !ok(receiver.createBackend("CUDA", {}, br), "createBackend"))
    return 1;
  nixl_reg_dlist_t rs(VRAM_SEG), rr(VRAM_SEG);
  rs.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(src), size, 0, ""));
  rr.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(dst), size, 0, ""));
  rr.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(counter), sizeof *counter, 0, ""));
  if (!ok(sender.registerMem(rs), "registerMem") || !ok(receiver.registerMem(rr), "registerMem"))
    return 1;
  nixl_blob_t md;
  std::string name;
  if (!ok(receiver.getLocalMD(md), "getLocalMD") ||
      !ok(sender.loadRemoteMD(md, name), "loadRemoteMD"))
    return 1;

  nixl_xfer_dlist_t local(VRAM_SEG);
  local.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(src), size, 0));
  nixl_remote_dlist_t remote(VRAM_SEG);
  remote.addDesc(nixlRemoteDesc(reinterpret_cast<uintptr_t>(dst), size, 0, "receiver"));
  remote.addDesc(
      nixlRemoteDesc(reinterpret_cast<uintptr_t>(counter), sizeof *counter, 0, "receiver"));
  nixlMemViewH lv = nullptr, rv = nullptr;
  if (!ok(sender.prepMemView(local, lv), "prepMemView(local)") ||
      !ok(sender.prepMemView(remote, rv), "prepMemView(remote)"))
    return 1;

  int* status = nullptr;
  cudaMalloc(&status, sizeof(int));
  send<<<1, 32>>>(lv, rv, size, status);
  int st = 0;
  unsigned long long count = 0;
  std::vector<char> got(size);
  cudaMemcpy(&st, status, sizeof st, cudaMemcpyDeviceToHost);
  cudaMemcpy(&count, counter, sizeof count, cudaMemcpyDeviceToHost);
  cudaMemcpy(got.data(), dst, size, cudaMemcpyDeviceToHost);
  size_t bad = 0;
  for (char c : got) bad += c != 0x5a;
  std::printf("kernel status %d (NIXL_IN_PROG = %d), counter %llu, %zu wrong bytes of %zu\n", st,
              NIXL_IN_PROG, count, bad, size);

  sender.releaseMemView(lv);
  sender.releaseMemView(rv);
  sender.invalidateRemoteMD("receiver");
  cudaFree(status);
  cudaFree(src);
  cudaFree(dst);
  cudaFree(counter);
  return st == NIXL_IN_PROG && count == 1 && bad == 0 ? 0 : 1;
}
