// DRAM <-> DRAM with another process of this host, copied by this process (`host_dram_copy=cma`,
// docs/ucx.md "Same-host DRAM"): UCX's cma transport makes one process_vm_writev call per put,
// which costs more than the copy of a small block; here one call copies up to
// `config::cma_iov` descriptors.

#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::ucx::detail {

bool engine::copy_cma(op_slot* s, const op_run& pt, bool write, std::uint32_t& done) noexcept {
  peer_state* p = s->peer.load(std::memory_order_relaxed);
  done = 0;
  if (p->cma_refused.load(std::memory_order_relaxed)) return false;
  std::array<iovec, config::cma_iov> here{};
  std::array<iovec, config::cma_iov> there{};
  while (done < pt.count) {
    if (p->gone()) {
      s->fail(status::remote_disconnect);
      return true;
    }
    std::size_t k = 0;
    std::size_t bytes = 0;
    for (std::uint32_t j = done; j < pt.count && k < here.size(); ++j, ++k) {
      const xfer_item& it = pt.items[j];
      here[k] = {it.local, it.len};
      there[k] = {reinterpret_cast<void*>(static_cast<std::uintptr_t>(it.remote)), it.len};
      bytes += it.len;
    }
    std::size_t lo = 0;  // the first descriptor of the batch not copied yet
    while (bytes > 0) {
      const auto n = static_cast<unsigned long>(k - lo);
      const ssize_t got = write ? ::process_vm_writev(pt.cma_pid, &here[lo], n, &there[lo], n, 0)
                                : ::process_vm_readv(pt.cma_pid, &here[lo], n, &there[lo], n, 0);
      if (got <= 0) {
        const int e = got == 0 ? EFAULT : errno;
        if (e == EINTR) continue;
        done += static_cast<std::uint32_t>(lo);
        if (e == EPERM || e == EACCES || e == ENOSYS) {
          // the kernel does not let this process into the peer's memory (ptrace rules, a
          // seccomp filter): UCX moves this peer's DRAM from here on
          if (!p->cma_refused.exchange(true, std::memory_order_relaxed))
            log::info("UCX: {} of '{}' (pid {}) refused ({}): UCX moves its DRAM from now on",
                      write ? "process_vm_writev" : "process_vm_readv", p->name, pt.cma_pid,
                      std::strerror(e));
          return false;
        }
        if (e == ESRCH) {
          s->fail(status::remote_disconnect);
        } else {
          log::error(
              "UCX: {} of '{}' (pid {}), {} bytes at {:#x}: {}",
              write ? "process_vm_writev into the memory" : "process_vm_readv from the memory",
              p->name, pt.cma_pid, there[lo].iov_len,
              reinterpret_cast<std::uintptr_t>(there[lo].iov_base), std::strerror(e));
          s->fail(status::backend);
        }
        return true;
      }
      // a short count stops at a descriptor: go on from there (the next call reports why)
      auto left = static_cast<std::size_t>(got);
      bytes -= left;
      while (left > 0) {
        if (left >= here[lo].iov_len) {
          left -= here[lo].iov_len;
          ++lo;
        } else {
          here[lo].iov_base = static_cast<char*>(here[lo].iov_base) + left;
          there[lo].iov_base = static_cast<char*>(there[lo].iov_base) + left;
          here[lo].iov_len -= left;
          there[lo].iov_len -= left;
          left = 0;
        }
      }
    }
    done += static_cast<std::uint32_t>(k);
  }
  return true;
}

}  // namespace nixl::ucx::detail
