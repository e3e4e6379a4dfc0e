// The baseline of the GDS benchmarks: direct cuFileRead/cuFileWrite of one block at a time,
// on one thread, over the same sweep as nixl-bench (block sizes doubling, iterations divided by
// --large_blk_iter_ftr above 1 MiB). Prints CSV: op,mem,block,iters,gbps,avg_us.
//
//   nixl_gds_baseline --dir /tmp --mem VRAM --op WRITE --start_block_size 4K
//       --max_block_size 256M --num_iter 1000 --warmup_iter 100 --large_blk_iter_ftr 16

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <nixl/backends/gds/cufile.hpp>
#include <nixl/status.hpp>

namespace cf = nixl::gds::cufile;

namespace {

std::size_t size_of(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (end != nullptr ? *end : '\0') {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<std::size_t>(v);
}

int die(const std::string& m) {
  std::fprintf(stderr, "nixl_gds_baseline: %s\n", m.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"--dir", "/tmp"},
                                          {"--mem", "VRAM"},
                                          {"--op", "WRITE"},
                                          {"--start_block_size", "4K"},
                                          {"--max_block_size", "256M"},
                                          {"--num_iter", "1000"},
                                          {"--warmup_iter", "100"},
                                          {"--large_blk_iter_ftr", "16"},
                                          {"--direct", "0"},
                                          {"--cufile_path", ""}};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (a.count(argv[i]) == 0) return die(std::string("unknown option ") + argv[i]);
    a[argv[i]] = argv[i + 1];
  }
  const bool vram = a["--mem"] == "VRAM";
  const bool write = a["--op"] == "WRITE";
  const std::size_t start = size_of(a["--start_block_size"]), max = size_of(a["--max_block_size"]);
  const int iters = std::atoi(a["--num_iter"].c_str());
  const int warmup = std::atoi(a["--warmup_iter"].c_str());
  const int factor = std::atoi(a["--large_blk_iter_ftr"].c_str());
  if (start == 0 || max < start) return die("bad block sizes");
  try {
    const auto& lib = cf::library::load(cf::library_path(a["--cufile_path"]));
    cf::driver drv(lib);
    const std::string path = a["--dir"] + "/nixl-gds-baseline-" + std::to_string(::getpid());
    const int fd = ::open(path.c_str(),
                          O_RDWR | O_CREAT | O_TRUNC | (a["--direct"] == "1" ? O_DIRECT : 0), 0600);
    if (fd < 0) return die("open " + path + ": " + std::strerror(errno));
    ::unlink(path.c_str());
    if (::ftruncate(fd, static_cast<off_t>(max)) != 0) return die("ftruncate");
    cf::CUfileDescr_t d{};
    d.type = cf::CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    cf::CUfileHandle_t fh = nullptr;
    if (auto e = lib.cuFileHandleRegister(&fh, &d); e.err != 0)
      return die("cuFileHandleRegister: " + cf::describe(e));
    void* buf = nullptr;
    if (vram) {
      if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&buf, max) != cudaSuccess)
        return die("cudaMalloc failed");
      cudaMemset(buf, 1, max);
      cudaDeviceSynchronize();
    } else {
      buf = std::aligned_alloc(4096, max);
      std::memset(buf, 1, max);
    }
    const bool registered = lib.cuFileBufRegister(buf, max, 0).err == 0;
    std::printf("op,mem,block,iters,gbps,avg_us\n");
    for (std::size_t block = start; block <= max; block *= 2) {
      int n = iters, w = warmup;
      if (block > (1u << 20) && factor > 1) {
        n = std::max(1, iters / factor);
        w = std::max(0, warmup / factor);
      }
      auto once = [&] {
        const ssize_t r =
            write ? lib.cuFileWrite(fh, buf, block, 0, 0) : lib.cuFileRead(fh, buf, block, 0, 0);
        return r == static_cast<ssize_t>(block);
      };
      for (int k = 0; k < w; ++k)
        if (!once()) return die("warm-up I/O failed at block " + std::to_string(block));
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < n; ++k)
        if (!once()) return die("I/O failed at block " + std::to_string(block));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s,%s,%zu,%d,%.3f,%.2f\n", write ? "WRITE" : "READ", vram ? "VRAM" : "DRAM",
                  block, n, static_cast<double>(block) * n / s / 1e9, s / n * 1e6);
      std::fflush(stdout);
    }
    if (registered) lib.cuFileBufDeregister(buf);
    lib.cuFileHandleDeregister(fh);
    if (vram)
      cudaFree(buf);
    else
      std::free(buf);
    ::close(fd);
  } catch (const std::exception& e) {
    return die(e.what());
  }
  return 0;
}
