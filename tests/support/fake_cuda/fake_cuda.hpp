#pragma once
// The test side of the stand-in CUDA driver (libcuda.cpp beside this file): loaded by its path
// (NIXL_FAKE_CUDA, from nixl_use_fake_cuda) before any backend loads "libcuda.so.1", so that the
// backends' dlopen finds this one by its soname, whatever LD_LIBRARY_PATH says; and its test
// controls.

#include <dlfcn.h>

#include <cstddef>

namespace nixl::test {

struct fake_cuda {
  void* lib = ::dlopen(NIXL_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  int (*alloc)(unsigned long long*, std::size_t) = nullptr;
  int (*free_)(unsigned long long) = nullptr;
  void (*fail_next)(int) = nullptr;  ///< 1: the next copy fails to start, 2: on query, 3: hangs
  long (*copies)() = nullptr;
  std::size_t (*host_bytes)() = nullptr;  ///< of cuMemHostAlloc memory not freed
  long (*ipc_opens)() = nullptr;          ///< cuIpcOpenMemHandle calls that succeeded
  long (*ipc_open_now)() = nullptr;       ///< mappings open now
  long (*host_registered)() = nullptr;    ///< cuMemHostRegister ranges not unregistered

  /// The process's stand-in (loaded on the first call).
  static fake_cuda& get() {
    static fake_cuda f;
    return f;
  }
  bool ok() const { return fail_next != nullptr && alloc != nullptr && ipc_opens != nullptr; }

 private:
  template <class F>
  void sym(F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(lib, name));
  }
  fake_cuda() {
    if (lib == nullptr) return;
    sym(alloc, "cuMemAlloc_v2");
    sym(free_, "cuMemFree_v2");
    sym(fail_next, "fake_cuda_fail_next");
    sym(copies, "fake_cuda_copies");
    sym(host_bytes, "fake_cuda_host_bytes");
    sym(ipc_opens, "fake_cuda_ipc_opens");
    sym(ipc_open_now, "fake_cuda_ipc_open_now");
    sym(host_registered, "fake_cuda_host_registered");
  }
};

}  // namespace nixl::test
