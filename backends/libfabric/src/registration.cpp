// Registration: one memory region per rail, keys and base in the region's public data.

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::libfabric {

namespace detail {

local_mr engine::register_memory(void* addr, std::size_t len) {
  local_mr m;
  try {
    for (auto& rp : rails_) {
      rail& r = *rp;
      const std::uint64_t want = prov_key_ ? 0 : next_key_.fetch_add(1);
      fid_mr* mr = nullptr;
      {
        std::lock_guard lk(r.mu);
        NIXL_FI_CHECK(
            fi_mr_reg(r.domain, addr, len, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                      want, 0, &mr, nullptr),
            "register_region on rail {}: {}, {} bytes", r.domain_name, addr, len);
        m.mrs.push_back(mr);
        if (mr_endpoint_) {
          NIXL_FI_CHECK(fi_mr_bind(mr, &r.ep->fid, 0), "register_region on rail {}", r.domain_name);
          NIXL_FI_CHECK(fi_mr_enable(mr), "register_region on rail {}", r.domain_name);
        }
      }
      const std::uint64_t key = fi_mr_key(mr);
      if (key == FI_KEY_NOTAVAIL)
        raise(status::not_supported, "LIBFABRIC register_region: rail {} has no 64-bit key",
              r.domain_name);
      m.descs.push_back(fi_mr_desc(mr));
      m.keys.push_back(key);
    }
  } catch (...) {
    deregister_memory(m);
    throw;
  }
  return m;
}

void engine::deregister_memory(local_mr& m) noexcept {
  if (orphans_.load(std::memory_order_acquire) > 0) {
    // a released request may still use it: close when libfabric is done
    std::lock_guard lk(deferred_mu_);
    try {
      deferred_.insert(deferred_.end(), m.mrs.begin(), m.mrs.end());
      m.mrs.clear();
    } catch (...) {
    }
  }
  for (fid_mr* mr : m.mrs) NIXL_FI_WARN(fi_close(&mr->fid));
  m.mrs.clear();
  m.descs.clear();
  m.keys.clear();
}

void engine::close_deferred(bool force) noexcept {
  std::vector<fid_mr*> list;
  {
    std::unique_lock lk(deferred_mu_, std::try_to_lock);
    if (!lk.owns_lock() || deferred_.empty()) return;
    if (!force && orphans_.load(std::memory_order_acquire) > 0) return;
    list.swap(deferred_);
  }
  for (fid_mr* mr : list) NIXL_FI_WARN(fi_close(&mr->fid));
}

}  // namespace detail

backend::region backend::register_region(mem_kind kind, const reg_desc& d) {
  if (kind != mem_kind::dram)
    raise(status::not_supported, "LIBFABRIC register_region: {} memory; this backend moves DRAM",
          to_string(kind));
  if (d.len == 0 || d.addr == 0)
    raise(status::invalid_param, "LIBFABRIC register_region: empty region {:#x}+{}", d.addr, d.len);
  region r;
  r.range = {d.addr, d.len, d.dev};
  r.kind = kind;
  r.mr = eng_->register_memory(reinterpret_cast<void*>(d.addr), d.len);
  detail::wire::rkey_record rec;
  rec.kind = kind;
  rec.virt_addr = eng_->virt_addr();
  rec.base = d.addr;
  rec.len = d.len;
  rec.keys = r.mr.keys;
  r.public_data = detail::wire::encode_rkey(rec);
  return r;
}

void backend::deregister_region(region& r) noexcept {
  eng_->deregister_memory(r.mr);
}

std::string backend::public_data(const region& r) const {
  return r.public_data;
}

}  // namespace nixl::libfabric
