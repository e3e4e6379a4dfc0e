// The LIBFABRIC engine: provider and rails (fabric, domain, address vector, completion queue,
// endpoint each), the rail-0 message buffers, the backend's identity, teardown.

#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::libfabric::detail {

namespace {

struct info_deleter {
  void operator()(fi_info* i) const noexcept { fi_freeinfo(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

char* dup(const std::string& s) {
  return ::strdup(s.c_str());
}

// fi_getinfo for an RDM endpoint with messages and RMA, optionally with FI_DELIVERY_COMPLETE.
info_ptr query(const std::string& provider, bool delivery, int& rc) {
  info_ptr hints(fi_allocinfo());
  if (!hints) throw std::bad_alloc();
  hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = dup(provider);
  if (delivery) hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  fi_info* out = nullptr;
  rc = fi_getinfo(api_version, nullptr, nullptr, 0, hints.get(), &out);
  return info_ptr(rc == 0 ? out : nullptr);
}

// The interface the provider's own variable pins, when the user named none.
std::string env_interface(const std::string& provider) {
  const char* v = nullptr;
  if (provider.rfind("tcp", 0) == 0) v = std::getenv("FI_TCP_IFACE");
  if (provider.rfind("sockets", 0) == 0) v = std::getenv("FI_SOCKETS_IFACE");
  return v != nullptr ? std::string(v) : std::string();
}

// Whether the provider reaches endpoints of this process through their own memory (see
// `local_life`): shm, and efa, which sends to peers of its host through shm.
bool shares_in_process(const std::string& provider) {
  const std::string first = provider.substr(0, provider.find(';'));
  return first == "shm" || first == "sm2" || first == "efa";
}

// The engines of this process: the live ones by identity, the identities of destroyed ones, and
// the libfabric objects of destroyed engines that another live engine may still reach.
struct local_registry {
  std::mutex mu;
  std::unordered_map<std::uint64_t, std::shared_ptr<local_life>> live;
  std::unordered_set<std::uint64_t> gone;
  std::size_t sharing = 0;  ///< live engines whose provider shares memory in process
  std::vector<std::unique_ptr<parked_engine>> parked;
  // Never destroyed: an engine left alive at exit keeps what it parked.
  static local_registry& get() {
    static auto* r = new local_registry;
    return *r;
  }
};

}  // namespace

/// What an engine opened: endpoints first, then the memory regions, the rest in reverse order of
/// opening with each rail, the message buffers last.
struct parked_engine {
  std::vector<std::unique_ptr<rail>> rails;
  std::vector<fid_mr*> deferred;
  fi_handle<fid_mr> bufs_mr;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> bufs{nullptr, nullptr};
  ~parked_engine() {
    for (auto& r : rails) r->ep.reset();
    for (fid_mr* mr : deferred) NIXL_FI_WARN(fi_close(&mr->fid));
    bufs_mr.reset();
    rails.clear();
  }
};

std::shared_ptr<local_life> find_local(std::uint64_t uid, bool& gone) {
  local_registry& reg = local_registry::get();
  std::lock_guard lk(reg.mu);
  gone = reg.gone.count(uid) != 0;
  const auto it = reg.live.find(uid);
  return it == reg.live.end() ? nullptr : it->second;
}

engine::engine(const config& cfg, const backend_context& bctx)
    : cfg_(cfg),
      agent_name_(bctx.agent_name),
      waker_(bctx.waker),
      provider_(cfg.effective_provider()) {
  if (agent_name_.size() > max_name_size)
    raise(status::invalid_param, "LIBFABRIC: agent name of {} bytes; at most {}",
          agent_name_.size(), max_name_size);
  if (::getrandom(&uid_, sizeof(uid_), 0) != sizeof(uid_))
    uid_ = static_cast<std::uint64_t>(now_ns()) ^ reinterpret_cast<std::uintptr_t>(this);
  if (uid_ == 0) uid_ = 1;
  try {
    open_rails();
    setup_buffers();
    // this agent as a peer of itself: its own addresses in its own address vectors
    auto self = std::make_unique<peer_state>();
    self->name = agent_name_;
    self->uid = uid_;
    self->is_self = true;
    self->contact.store(true);
    self->remote_rails = rails_.size();
    for (auto& r : rails_) {
      fi_addr_t a = FI_ADDR_UNSPEC;
      const int n = fi_av_insert(r->av, r->address.data(), 1, &a, 0, nullptr);
      if (n != 1) NIXL_FI_CHECK(n < 0 ? n : -FI_EINVAL, "inserting this agent's own address");
      self->addr.push_back(a);
    }
    self_ = self.get();
    peers_.push_back(std::move(self));
    std::vector<std::string> doms, addrs;
    for (auto& r : rails_) {
      doms.push_back(r->domain_name);
      addrs.push_back(r->address);
    }
    conn_info_ = wire::encode_conn_info(uid_, provider_, doms, addrs);
    retry_.reserve(256);
    shares_in_process_ = shares_in_process(provider_);
    {
      local_registry& reg = local_registry::get();
      auto life = std::make_shared<local_life>();
      std::lock_guard lk(reg.mu);
      reg.live.emplace(uid_, life);
      if (shares_in_process_) ++reg.sharing;
      life_ = std::move(life);
    }
    if (cfg_.enable_prog_thread.value_or(bctx.progress_thread)) start_thread();
  } catch (...) {
    teardown();  // closes what was opened
    throw;
  }
}

void engine::open_rails() {
  const std::string requested = provider_;
  int rc = 0;
  info_ptr list = query(requested, true, rc);
  if (list) {
    rma_flags_ = FI_DELIVERY_COMPLETE;
  } else {
    list = query(requested, false, rc);
    if (!list)
      raise(status::not_supported,
            "LIBFABRIC: provider '{}' offers no RDM endpoint with messages and RMA ({}); check "
            "`fi_info -p '{}' -t FI_EP_RDM -c FI_RMA`, or choose another with the `provider` "
            "parameter or FI_PROVIDER",
            requested, fi_strerror(-rc), requested);
    log::info(
        "LIBFABRIC: provider '{}' has no FI_DELIVERY_COMPLETE; notifications follow "
        "transmit completions",
        requested);
  }

  std::vector<std::string> wanted = cfg_.interfaces;
  if (wanted.empty()) {
    if (const char* e = std::getenv("NIXL_LIBFABRIC_INTERFACES"); e != nullptr)
      wanted = config::split_list(e);
  }
  if (wanted.size() > config::max_rails)
    raise(status::invalid_param, "LIBFABRIC: {} interfaces; at most {} rails", wanted.size(),
          config::max_rails);
  if (wanted.empty()) {
    if (std::string e = env_interface(requested); !e.empty()) wanted.push_back(e);
  }
  // One info per domain: the first of its entries, IPv4 before other address formats.
  std::vector<fi_info*> chosen;
  auto pick = [&](const std::string& dom) -> fi_info* {
    fi_info* first = nullptr;
    for (fi_info* i = list.get(); i != nullptr; i = i->next) {
      if (!dom.empty() && (i->domain_attr->name == nullptr || dom != i->domain_attr->name))
        continue;
      if (i->addr_format == FI_SOCKADDR_IN) return i;
      if (first == nullptr) first = i;
    }
    return first;
  };
  if (wanted.empty()) {
    chosen.push_back(pick(list->domain_attr->name ? list->domain_attr->name : ""));
  } else {
    for (const std::string& w : wanted) {
      fi_info* i = pick(w);
      if (i == nullptr) {
        std::string have;
        for (fi_info* j = list.get(); j != nullptr; j = j->next)
          if (j->domain_attr->name && have.find(j->domain_attr->name) == std::string::npos)
            have += fmt::format("{}{}", have.empty() ? "" : ", ", j->domain_attr->name);
        raise(status::not_found,
              "LIBFABRIC: provider '{}' has no domain '{}' (it has: {}); name an interface or "
              "domain that `fi_info -p '{}'` lists",
              requested, w, have, requested);
      }
      chosen.push_back(i);
    }
  }
  for (fi_info* src : chosen) {
    auto r = std::make_unique<rail>();
    r->info.reset(fi_dupinfo(src));
    if (r->info == nullptr) throw std::bad_alloc();
    r->domain_name = r->info->domain_attr->name ? r->info->domain_attr->name : "";
    rails_.push_back(std::move(r));
    rail& x = *rails_.back();
    NIXL_FI_CHECK(fi_fabric(x.info->fabric_attr, x.fabric.out(), nullptr), "rail {}",
                  x.domain_name);
    NIXL_FI_CHECK(fi_domain(x.fabric, x.info, x.domain.out(), nullptr), "rail {}", x.domain_name);
    fi_av_attr av{};
    av.type =
        x.info->domain_attr->av_type != FI_AV_UNSPEC ? x.info->domain_attr->av_type : FI_AV_TABLE;
    NIXL_FI_CHECK(fi_av_open(x.domain, &av, x.av.out(), nullptr), "rail {}", x.domain_name);
    fi_cq_attr cq{};
    cq.format = FI_CQ_FORMAT_MSG;
    cq.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(x.domain, &cq, x.cq.out(), nullptr) != 0) {
      cq.wait_obj = FI_WAIT_NONE;  // the progress thread then polls with short sleeps
      NIXL_FI_CHECK(fi_cq_open(x.domain, &cq, x.cq.out(), nullptr), "rail {}", x.domain_name);
    } else if (fi_control(&x.cq->fid, FI_GETWAIT, &x.wait_fd) != 0) {
      x.wait_fd = -1;
    }
    NIXL_FI_CHECK(fi_endpoint(x.domain, x.info, x.ep.out(), nullptr), "rail {}", x.domain_name);
    NIXL_FI_CHECK(fi_ep_bind(x.ep, &x.av->fid, 0), "rail {}", x.domain_name);
    NIXL_FI_CHECK(fi_ep_bind(x.ep, &x.cq->fid, FI_TRANSMIT | FI_RECV), "rail {}", x.domain_name);
    // shm names an endpoint's region "<pid>:<endpoint>:<domain>" unless told otherwise. A
    // process killed with SIGKILL leaves that file in /dev/shm, and a later process that gets
    // the same pid (pid_max is 32768 on many hosts) then fails fi_enable with EBUSY. A name
    // made of this engine's own random identity never meets a stale one; the pid in front says
    // whose it was.
    if (provider_.rfind("shm", 0) == 0) {
      const std::string name =
          fmt::format("nixl_{}_{:016x}_{}", ::getpid(), uid_, rails_.size() - 1);
      NIXL_FI_CHECK(fi_setname(&x.ep->fid, const_cast<char*>(name.c_str()), name.size() + 1),
                    "rail {}", x.domain_name);
    }
    NIXL_FI_CHECK(fi_enable(x.ep), "rail {}", x.domain_name);
    std::size_t len = 256;
    x.address.resize(len);
    int g = fi_getname(&x.ep->fid, x.address.data(), &len);
    if (g == -FI_ETOOSMALL && len <= wire::max_address_size) {
      x.address.resize(len);
      g = fi_getname(&x.ep->fid, x.address.data(), &len);
    }
    NIXL_FI_CHECK(g, "rail {}: endpoint address", x.domain_name);
    if (len == 0 || len > wire::max_address_size)
      raise(status::backend, "LIBFABRIC rail {}: endpoint address of {} bytes", x.domain_name, len);
    x.address.resize(len);
    x.max_msg = x.info->ep_attr->max_msg_size;
  }
  const std::uint64_t mode = rails_[0]->info->domain_attr->mr_mode;
  for (auto& r : rails_)
    if (r->info->domain_attr->mr_mode != mode)
      raise(status::not_supported, "LIBFABRIC: rails {} and {} differ in memory registration mode",
            rails_[0]->domain_name, r->domain_name);
  virt_addr_ = (mode & FI_MR_VIRT_ADDR) != 0;
  prov_key_ = (mode & FI_MR_PROV_KEY) != 0;
  mr_endpoint_ = (mode & FI_MR_ENDPOINT) != 0;
  mr_local_ = (mode & FI_MR_LOCAL) != 0;
  if (rails_[0]->info->fabric_attr->prov_name != nullptr)
    provider_ = rails_[0]->info->fabric_attr->prov_name;
  sends_in_call_ = provider_.rfind("tcp", 0) == 0 || provider_.rfind("sockets", 0) == 0;
  log::info("LIBFABRIC: provider {}, {} rail(s), mr_mode {:#x}, delivery complete {}", provider_,
            rails_.size(), mode, rma_flags_ != 0);
}

void engine::setup_buffers() {
  msg_cap_ = (wire::header_size + 2 + max_name_size + cfg_.max_notif_size + 63) / 64 * 64;
  send_count_ = 64;
  const std::size_t total = msg_cap_ * (cfg_.rx_buffers + send_count_);
  void* p = std::aligned_alloc(4096, (total + 4095) / 4096 * 4096);
  if (p == nullptr) throw std::bad_alloc();
  bufs_ = decltype(bufs_)(static_cast<std::byte*>(p), [](std::byte* b) { std::free(b); });
  rail& r0 = *rails_[0];
  const std::uint64_t key = prov_key_ ? 0 : next_key_.fetch_add(1);
  NIXL_FI_CHECK(
      fi_mr_reg(r0.domain, p, total, FI_SEND | FI_RECV, 0, key, 0, bufs_mr_.out(), nullptr),
      "message buffers");
  if (mr_endpoint_) {
    NIXL_FI_CHECK(fi_mr_bind(bufs_mr_, &r0.ep->fid, 0), "message buffers");
    NIXL_FI_CHECK(fi_mr_enable(bufs_mr_), "message buffers");
  }
  bufs_desc_ = fi_mr_desc(bufs_mr_);
  recv_ctx_.resize(cfg_.rx_buffers);
  send_ctx_.resize(send_count_);
  for (std::uint32_t i = 0; i < send_count_; ++i) {
    send_ctx_[i].kind = ctx_kind::ctrl;
    send_ctx_[i].index = i;
    free_send_.push_back(i);
  }
  for (std::uint32_t i = 0; i < cfg_.rx_buffers; ++i) {
    recv_ctx_[i].kind = ctx_kind::recv;
    recv_ctx_[i].index = i;
    post_recv(i);
  }
}

void engine::post_recv(std::uint32_t i) noexcept {
  rail& r0 = *rails_[0];
  std::byte* buf = bufs_.get() + msg_cap_ * i;
  for (int attempt = 0; attempt < 1000 && !stop_.load(std::memory_order_relaxed); ++attempt) {
    ssize_t rc;
    {
      std::lock_guard lk(r0.mu);
      rc = fi_recv(r0.ep, buf, msg_cap_, bufs_desc_, FI_ADDR_UNSPEC, &recv_ctx_[i]);
    }
    if (rc == 0) return;
    if (rc != -FI_EAGAIN) {
      NIXL_FI_WARN(rc);
      return;
    }
    drain(0);
  }
  log::warn("LIBFABRIC: could not post receive buffer {}; {} remain", i, cfg_.rx_buffers - 1);
}

int engine::take_send_buffer() noexcept {
  std::lock_guard lk(send_mu_);
  if (free_send_.empty()) return -1;
  const std::uint32_t i = free_send_.back();
  free_send_.pop_back();
  return static_cast<int>(i);
}

void engine::give_send_buffer(std::uint32_t i) noexcept {
  std::lock_guard lk(send_mu_);
  free_send_.push_back(i);  // capacity reserved: never more than send_count_ entries
}

engine::~engine() {
  teardown();
}

std::unique_ptr<parked_engine> engine::take_resources() noexcept {
  auto p = std::make_unique<parked_engine>();
  p->rails = std::move(rails_);
  {
    std::lock_guard lk(deferred_mu_);
    p->deferred.swap(deferred_);
  }
  p->bufs_mr = std::move(bufs_mr_);
  p->bufs = std::move(bufs_);
  return p;
}

void engine::teardown() noexcept {
  // The other engines of the process stop addressing this one (a call under way ends first).
  if (life_) {
    std::unique_lock lk(life_->mu);
    life_->alive = false;
  }
  stop_.store(true);
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  // Operations still in flight (of released requests, or to a peer declared failed that still
  // answers) end before their endpoints close: tcp;ofi_rxm crashed in fi_close of an endpoint
  // with a read under way. Bounded: a dead peer's operations may never end.
  const std::int64_t until =
      now_ns() + std::chrono::nanoseconds(
                     std::min<std::chrono::nanoseconds>(cfg_.peer_timeout, std::chrono::seconds(1)))
                     .count();
  while (now_ns() < until) {
    bool busy = false;
    slots_.for_each([&](const op_slot& s) {
      busy = busy || s.state() == phase::busy || s.state() == phase::orphan;
    });
    if (!busy) break;
    for (std::size_t i = 0; i < rails_.size(); ++i) drain(i);
    std::this_thread::yield();
  }
  std::unique_ptr<parked_engine> mine;
  try {
    mine = take_resources();
  } catch (...) {
    // no memory to hand them over: close in place
    for (auto& r : rails_) r->ep.reset();
    close_deferred(true);
    bufs_mr_.reset();
    rails_.clear();
    return;
  }
  // With the shm provider another engine of this process may still hold this endpoint's region
  // (an address it inserted, an operation of this one it answers): the endpoint stays open, not
  // progressed, until no engine of the process that could reach it is left. The last one closes
  // every endpoint kept so.
  std::vector<std::unique_ptr<parked_engine>> close;
  if (life_) {
    local_registry& reg = local_registry::get();
    std::lock_guard lk(reg.mu);
    reg.live.erase(uid_);
    try {
      reg.gone.insert(uid_);
    } catch (...) {
    }
    if (shares_in_process_) {
      --reg.sharing;
      if (reg.sharing > 0) {
        try {
          reg.parked.push_back(std::move(mine));
        } catch (...) {
          // no memory to keep it: closing is what was done before; a peer may still crash
        }
      } else {
        close.swap(reg.parked);
      }
    }
  }
  mine.reset();
  close.clear();
}

}  // namespace nixl::libfabric::detail
