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

void engine::copy_cma(op_slot* s, const op_run& pt, bool write) noexcept {
  peer_state* p = s->peer.load(std::memory_order_relaxed);
  std::uint32_t done = 0;
  std::array<iovec, config::cma_iov> here{};
  std::array<iovec, config::cma_iov> there{};
  while (done < pt.count) {
    if (p->gone()) {
      s->fail(status::remote_disconnect);
      return;
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
        if (e == EPERM || e == EACCES || e == ENOSYS) {
          // The kernel closed the peer's memory to this process after the endpoints were made
          // (the peer turned non-dumpable, this process lost CAP_SYS_PTRACE or entered a
          // seccomp filter). UCX's own cma lane would be refused the same way, and its failure
          // would cut the connection: the request fails, the peer stays (notifications still
          // reach it), and the next request tries again.
          if (!p->cma_refused.exchange(true, std::memory_order_relaxed))
            log::error(
                "UCX: {} of '{}' (pid {}) refused ({}): the kernel no longer lets this process "
                "into that one's memory; its same-host DRAM requests end with "
                "NIXL_ERR_NOT_ALLOWED while that lasts (UCX's cma would be refused too)",
                write ? "process_vm_writev" : "process_vm_readv", p->name, pt.cma_pid,
                std::strerror(e));
          s->fail(status::not_allowed);
        } else if (e == ESRCH) {
          s->fail(status::remote_disconnect);
        } else {
          log::error(
              "UCX: {} of '{}' (pid {}), {} bytes at {:#x}: {}",
              write ? "process_vm_writev into the memory" : "process_vm_readv from the memory",
              p->name, pt.cma_pid, there[lo].iov_len,
              reinterpret_cast<std::uintptr_t>(there[lo].iov_base), std::strerror(e));
          s->fail(status::backend);
        }
        return;
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
}

}  // namespace nixl::ucx::detail
