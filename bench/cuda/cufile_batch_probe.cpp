// Host memory through cuFile's batch API: does what lands in the file (WRITE) and in memory
// (READ) match, for each way of naming the buffer in a batch entry? The GDS backend moves DRAM
// chunks with synchronous calls on threads by default because this path gave wrong data on
// libcufile 1.15 in compatibility mode (docs/gds.md); this probe separates the candidates:
// buffered or O_DIRECT file, the entry naming its memory as base + devPtr_offset or as a
// pointer with offset 0, the buffer registered with cuFileBufRegister or not, and the number of
// entries per batch. One line per case; synchronous cuFileRead/cuFileWrite with the same
// offsets run first as the control.
//   nixl_cufile_batch_probe DIR        (DIR on ext4 or xfs; the library: $NIXL_CUFILE_PATH)

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nixl/backends/gds/detail/cufile.hpp>

namespace {

using namespace nixl::gds::cufile;

const library* lib = nullptr;

bool ok(CUfileError_t e, const char* what) {
  if (e.err == CU_FILE_SUCCESS) return true;
  std::fprintf(stderr, "%s: %s\n", what, describe(e).c_str());
  return false;
}

void fill(unsigned char* p, std::size_t n, unsigned seed) {
  std::uint32_t x = 2463534242u ^ (seed * 2654435761u);
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = static_cast<unsigned char>(x);
  }
}

/// Entries whose `size` bytes differ between `a` and `b`; `first` the first one, and `like` the
/// entry of `want` it holds instead (-1: none).
struct diff {
  int bad = 0, first = -1, like = -1;
};
diff compare(const unsigned char* got, const unsigned char* want, unsigned n, std::size_t size) {
  diff d;
  for (unsigned i = 0; i < n; ++i) {
    if (std::memcmp(got + i * size, want + i * size, size) == 0) continue;
    if (d.bad++ == 0) {
      d.first = static_cast<int>(i);
      for (unsigned j = 0; j < n; ++j)
        if (std::memcmp(got + i * size, want + j * size, size) == 0) d.like = static_cast<int>(j);
    }
  }
  return d;
}

std::string show(const diff& d, bool failed) {
  if (failed) return "call failed";
  if (d.bad == 0) return "ok";
  std::string s = "BAD " + std::to_string(d.bad) + " entries, first " + std::to_string(d.first);
  if (d.like >= 0) s += " holds entry " + std::to_string(d.like) + "'s bytes";
  return s;
}

/// One batch of `n` entries of `size` bytes, entry i at file offset i * size and memory
/// buf + i * size; waits up to 20 s. False when cuFile refused or an entry failed.
bool batch(CUfileHandle_t fh, unsigned char* buf, unsigned n, std::size_t size, bool write,
           bool flat) {
  CUfileBatchHandle_t h = nullptr;
  if (!ok(lib->cuFileBatchIOSetUp(&h, n), "cuFileBatchIOSetUp")) return false;
  std::vector<CUfileIOParams_t> p(n);
  for (unsigned i = 0; i < n; ++i) {
    p[i] = {};
    p[i].mode = CUFILE_BATCH;
    p[i].u.batch.devPtr_base = flat ? buf + i * size : buf;
    p[i].u.batch.devPtr_offset = flat ? 0 : static_cast<off_t>(i * size);
    p[i].u.batch.file_offset = static_cast<off_t>(i * size);
    p[i].u.batch.size = size;
    p[i].fh = fh;
    p[i].opcode = write ? CUFILE_WRITE : CUFILE_READ;
    p[i].cookie = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i));
  }
  bool good = ok(lib->cuFileBatchIOSubmit(h, n, p.data(), 0), "cuFileBatchIOSubmit");
  unsigned done = 0;
  std::vector<CUfileIOEvents_t> ev(n);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (good && done < n) {
    unsigned nr = n - done;
    timespec zero{};
    if (!ok(lib->cuFileBatchIOGetStatus(h, 0, &nr, ev.data(), &zero), "cuFileBatchIOGetStatus"))
      good = false;
    for (unsigned i = 0; good && i < nr; ++i) {
      if ((ev[i].status & CUFILE_COMPLETE) == 0 || ev[i].ret != size) {
        std::fprintf(stderr, "entry %zu: status 0x%x ret %zd\n",
                     reinterpret_cast<std::uintptr_t>(ev[i].cookie), ev[i].status,
                     static_cast<ssize_t>(ev[i].ret));
        good = false;
      }
      ++done;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "batch: %u of %u entries after 20 s\n", done, n);
      good = false;
    }
    if (done < n) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!good) lib->cuFileBatchIOCancel(h);
  lib->cuFileBatchIODestroy(h);
  return good;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string file = std::string(argv[1]) + "/cufile_batch_probe.dat";
  try {
    lib = &library::load(library_path(""), "probe");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::unique_ptr<driver> drv;
  try {
    drv = std::make_unique<driver>(*lib);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("libcufile: %s\n", lib->path.c_str());
  std::printf("%-8s %-9s %-5s %4s %8s  %-45s %s\n", "file", "entry", "reg", "n", "size", "WRITE",
              "READ");
  int bad_cases = 0;
  for (const bool direct : {false, true}) {
    for (const unsigned n : {1u, 4u, 16u}) {
      for (const std::size_t size : {std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 20}) {
        // 0: synchronous calls; batch entries: 1 base + offset, 2 pointer, 3 base + offset of a
        // registered buffer, 4 pointer into a registered buffer
        for (const int mode : {0, 1, 2, 3, 4}) {
          const bool flat = mode == 2 || mode == 4, reg = mode >= 3;
          const std::size_t total = n * size;
          auto* want = static_cast<unsigned char*>(std::aligned_alloc(4096, total));
          auto* buf = static_cast<unsigned char*>(std::aligned_alloc(4096, total));
          auto* back = static_cast<unsigned char*>(std::aligned_alloc(4096, total));
          fill(want, total, n * 131 + static_cast<unsigned>(size) + mode);
          std::memcpy(buf, want, total);
          const int fd =
              ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0600);
          const int plain = ::open(file.c_str(), O_RDONLY);
          if (fd < 0 || plain < 0) {
            std::perror("open");
            return 1;
          }
          CUfileDescr_t d{};
          d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
          d.handle.fd = fd;
          CUfileHandle_t fh = nullptr;
          if (!ok(lib->cuFileHandleRegister(&fh, &d), "cuFileHandleRegister")) return 1;
          const bool registered = reg && ok(lib->cuFileBufRegister(buf, total, 0), "BufRegister");
          // Entry i of `n`: synchronous calls (mode 0) or one batch. False when one failed.
          const auto move = [&](bool write) {
            if (mode != 0) return batch(fh, buf, n, size, write, flat);
            bool good = true;
            for (unsigned i = 0; i < n; ++i) {
              const auto at = static_cast<off_t>(i * size);
              good &=
                  (write ? lib->cuFileWrite(fh, buf, size, at, at)
                         : lib->cuFileRead(fh, buf, size, at, at)) == static_cast<ssize_t>(size);
            }
            return good;
          };
          const bool wfail = !move(true);
          // What the file holds, read without cuFile.
          std::memset(back, 0, total);
          const bool short_read = ::pread(plain, back, total, 0) != static_cast<ssize_t>(total);
          const diff w = compare(back, want, n, size);
          std::memset(buf, 0, total);
          const bool rfail = !move(false);
          const diff r = compare(buf, want, n, size);
          if (registered) lib->cuFileBufDeregister(buf);
          lib->cuFileHandleDeregister(fh);
          ::close(plain);
          ::close(fd);
          const char* entry = mode == 0 ? "sync" : flat ? "pointer" : "base+off";
          const std::string ws = short_read ? "short file" : show(w, wfail);
          const std::string rs = show(r, rfail);
          if (ws != "ok" || rs != "ok") ++bad_cases;
          std::printf("%-8s %-9s %-5s %4u %8zu  %-45s %s\n", direct ? "O_DIRECT" : "buffered",
                      entry, reg ? (registered ? "yes" : "refused") : "no", n, size, ws.c_str(),
                      rs.c_str());
          std::fflush(stdout);
          std::free(want);
          std::free(buf);
          std::free(back);
        }
      }
    }
  }
  ::unlink(file.c_str());
  std::printf("cases with wrong data or a failed call: %d\n", bad_cases);
  return bad_cases == 0 ? 0 : 3;
}
