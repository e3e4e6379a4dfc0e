// Setup path of the POSIX backend: engine choice, registration, prepare, queries (parameters:
// config.cpp; engines: engine_*.cpp).

#include <nixl/backends/posix.hpp>
#include <nixl/backends/posix/check.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <utility>

#include <fmt/format.h>

namespace nixl::posix {
namespace {

using detail::engine_kind;

void fill_direct(backend::region& r) {
  int fl = ::fcntl(r.fd, F_GETFL);
  r.direct = fl >= 0 && (fl & O_DIRECT) != 0;
  if (!r.direct) return;
  r.mem_align = r.off_align = 512;
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (::statx(r.fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) != 0 && stx.stx_dio_mem_align != 0) {
    r.mem_align = stx.stx_dio_mem_align;
    r.off_align = stx.stx_dio_offset_align;
  }
#endif
}

}  // namespace

namespace {

/// The engine `cfg` asks for, falling back along io_uring, AIO, pread/pwrite.
detail::engine start_engine(const backend::config& cfg, const nixl::backend_context& ctx) {
  std::vector<engine_kind> order;
  if (cfg.preferred) order.push_back(*cfg.preferred);
  for (auto k : {engine_kind::uring, engine_kind::aio, engine_kind::posix})
    if (cfg.allowed[static_cast<int>(k)] && std::find(order.begin(), order.end(), k) == order.end())
      order.push_back(k);
  if (std::find(order.begin(), order.end(), engine_kind::posix) == order.end())
    order.push_back(engine_kind::posix);  // always possible: the last resort

  detail::engine_options o{cfg.queue_depth, cfg.threads, ctx.waker};
  std::string why;
  for (auto k : order) {
    if (!detail::engine_built(k)) {
      log::warn("POSIX backend ({}): engine {} is not in this build; trying the next one",
                ctx.agent_name, detail::to_string(k));
      continue;
    }
    try {
      detail::engine e = detail::make_engine(k, o);
      if (cfg.preferred && k != *cfg.preferred)
        log::warn("POSIX backend ({}): asked for {}, using {}", ctx.agent_name,
                  detail::to_string(*cfg.preferred), detail::to_string(k));
      log::info("POSIX backend ({}): engine {}, queue depth {}", ctx.agent_name,
                detail::to_string(k), std::visit([](const auto& x) { return x.depth(); }, e));
      return e;
    } catch (const std::exception& e) {
      log::warn("POSIX backend ({}): engine {} cannot start here: {}; trying the next one",
                ctx.agent_name, detail::to_string(k), e.what());
      why += fmt::format("{}: {}; ", detail::to_string(k), e.what());
    }
  }
  raise(status::backend, "POSIX backend: no I/O engine could start ({})", why);
}

}  // namespace

backend::backend(const config& cfg, const nixl::backend_context& ctx)
    : engine_(start_engine(cfg, ctx)) {}

backend::~backend() = default;
backend::backend(backend&&) noexcept = default;
backend& backend::operator=(backend&&) noexcept = default;

backend::region backend::register_region(mem_kind kind, const nixl::reg_desc& d) {
  region r;
  r.kind = kind;
  if (kind == mem_kind::dram) return r;
  if (kind != mem_kind::file)
    raise(status::not_supported,
          "POSIX register_region: memory kind {} is not supported; use dram or file", kind);
  static_cast<nixl::detail::file_ref&>(r) = nixl::detail::open_file("POSIX", d);
  fill_direct(r);
  return r;
}

void backend::deregister_region(region& r) noexcept {
  r.close();
}

void backend::prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer&) {
  if (local.size() != remote.size())
    raise(status::invalid_param,
          "POSIX prepare: {} local and {} remote descriptors; give both the same count",
          local.size(), remote.size());
  if (req.batch.state.busy())
    raise(status::repost_active, "POSIX prepare: the request is still in flight; release it first");

  nixl::detail::recycled_vector<detail::io_op> ops;
  ops.reserve(local.size());
  std::optional<bool> write;
  for (std::size_t i = 0; i < local.size(); ++i) {
    const auto& l = local[i];
    const auto& r = remote[i];
    mem_kind lk = l.region != nullptr ? l.region->kind : mem_kind::dram;
    mem_kind rk = r.region != nullptr ? r.region->kind : mem_kind::dram;
    if (!can_move(lk, rk))
      raise(status::invalid_param,
            "POSIX prepare: descriptor {} pairs local {} with remote {}; POSIX moves dram <-> file "
            "only",
            i, lk, rk);
    if (l.len != r.len)
      raise(status::invalid_param,
            "POSIX prepare: descriptor {} has local length {} and remote length {}", i, l.len,
            r.len);
    const bool file_remote = rk == mem_kind::file;
    const desc& mem = file_remote ? static_cast<const desc&>(l) : static_cast<const desc&>(r);
    const desc& fil = file_remote ? static_cast<const desc&>(r) : static_cast<const desc&>(l);
    int fd = file_remote ? r.region->fd : l.region->fd;
    bool direct = file_remote ? r.region->direct : l.region->direct;
    std::uint32_t ma = file_remote ? r.region->mem_align : l.region->mem_align;
    std::uint32_t oa = file_remote ? r.region->off_align : l.region->off_align;
    // read pulls remote into local: with the file remote that is a file read.
    bool w = (op == xfer_op::read) != file_remote;
    if (write && *write != w)
      raise(status::invalid_param,
            "POSIX prepare: descriptor {} moves in the other direction than descriptor 0", i);
    write = w;
    if (fd < 0)
      raise(status::invalid_param,
            "POSIX prepare: descriptor {} lies in a file region that was deregistered", i);
    if (direct && (mem.addr % ma != 0 || fil.addr % oa != 0 || fil.len % oa != 0))
      raise(status::invalid_param,
            "POSIX prepare: descriptor {} (memory 0x{:x}, file offset {}, length {}) breaks the "
            "O_DIRECT "
            "alignment of fd {} (memory {}, offset and length {}); align the buffer and the range "
            "or open "
            "the file without O_DIRECT",
            i, mem.addr, fil.addr, fil.len, fd, ma, oa);
    if (fil.len == 0) continue;
    ops.push_back(
        detail::io_op{reinterpret_cast<std::byte*>(mem.addr), fil.addr, fil.len, 0, fd, direct});
  }
  req.batch.ops = std::move(ops);
  req.batch.write = write.value_or(false);
  req.batch.state.reset();
  req.reported = false;
}

void backend::report(request& req) const noexcept {
  req.reported = true;
  const auto& b = req.batch;
  if (b.err == ECANCELED) return;
  if (b.err_op >= b.ops.size()) return;
  const auto& op = b.ops[b.err_op];
  try {
    log::error(
        "POSIX/{}: {} of {} bytes at file offset {} on fd {} (operation {} of {}) failed: {}",
        detail::to_string(detail::kind_of(engine_)), b.write ? "write" : "read", op.len, op.offset,
        op.fd, b.err_op, b.ops.size(), detail::error_text(b.err));
  } catch (...) {
  }
}

std::vector<std::optional<nixl::params>> backend::query_memory(
    std::span<const nixl::reg_desc> descs) const {
  return nixl::detail::query_files("POSIX", descs);
}

}  // namespace nixl::posix
