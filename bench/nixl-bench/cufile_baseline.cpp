// The baseline of --backend GDS and GDS_MT: direct cuFileRead/cuFileWrite of the same blocks,
// one synchronous call per block on one thread, through the GDS backends' loader of libcufile.

#include <fcntl.h>
#include <unistd.h>

#include <exception>

#include <nixl/backends/gds/cufile.hpp>

#include "baselines.hpp"
#if defined(NIXL_BENCH_GDS_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nixl_bench {

baseline_result cufile_baseline(const std::string& path, std::uintptr_t base, nixl::mem_kind kind,
                                int gpu, const nb::layout& lay, const nb::point& p, bool read) {
  namespace cf = nixl::gds::cufile;
  auto none = [](const std::string& why) {
    fmt::print(stderr, "nixl-bench: cufile baseline: {}; no baseline for this point\n", why);
    return baseline_result{};
  };
  try {
    const auto& lib = cf::library::load(cf::library_path({}));
    cf::driver drv(lib);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return none("open " + path);
    cf::CUfileDescr_t d{};
    d.type = cf::CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    cf::CUfileHandle_t fh = nullptr;
    if (auto e = lib.cuFileHandleRegister(&fh, &d); e.err != cf::CU_FILE_SUCCESS) {
      ::close(fd);
      return none("cuFileHandleRegister: " + cf::describe(e));
    }
#if defined(NIXL_BENCH_GDS_CUDA)
    if (kind == nixl::mem_kind::vram) cudaSetDevice(gpu);
#else
    (void)gpu;
#endif
    (void)kind;
    const std::size_t span = lay.offset(0, p.batch - 1) + lay.block;
    auto* mem = reinterpret_cast<void*>(base);
    const bool reg = lib.cuFileBufRegister(mem, span, 0).err == cf::CU_FILE_SUCCESS;
    bool ok = true;
    auto once = [&] {
      for (std::size_t i = 0; i < p.batch && ok; ++i) {
        const std::size_t off = lay.offset(0, i);
        auto* b = static_cast<char*>(mem) + off;
        const ssize_t r = read ? lib.cuFileRead(fh, b, lay.block, static_cast<off_t>(off), 0)
                               : lib.cuFileWrite(fh, b, lay.block, static_cast<off_t>(off), 0);
        ok = r == static_cast<ssize_t>(lay.block);
      }
    };
    for (int k = 0; k < p.warmup && ok; ++k) once();
    const auto a = nb::clock::now();
    for (int k = 0; k < p.iters && ok; ++k) once();
    const double us = nb::us_since(a, nb::clock::now());
    if (reg) lib.cuFileBufDeregister(mem);
    lib.cuFileHandleDeregister(fh);
    ::close(fd);
    if (!ok) return none(read ? "cuFileRead failed" : "cuFileWrite failed");
    return {static_cast<double>(lay.block * p.batch) * p.iters / us / 1e3, us / p.iters};
  } catch (const std::exception& e) {
    return none(e.what());
  }
}

}  // namespace nixl_bench
