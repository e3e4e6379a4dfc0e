// The central-store part of the exchange: lease, published keys, waiting fetches and watches.
#include "central.hpp"
#include "store_tasks.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nixl/log.hpp>
#include <nixl/metadata/etcd.hpp>
#include <nixl/status.hpp>

namespace nixl::metadata::detail {

using namespace std::chrono_literals;

template <>
struct central_store::state : store_context {
  std::unique_ptr<etcd_client> etcd;
  std::unique_ptr<etcd_watcher> watcher;
  std::thread etcd_thread;
  store_tasks tasks{"etcd", [this] { watcher->wakeup(); }};
  std::int64_t lease = 0;
  clock::time_point next_keepalive{};
  std::map<std::string, std::string, std::less<>> published;  // label -> blob
  struct peer_watch {
    etcd_watcher::id wid = 0;
    std::int64_t revision = 0;  // last revision seen
    clock::time_point retry{};  // when a broken watch is re-created
  };
  std::map<std::string, peer_watch, std::less<>> peers;  // agent -> watch of its prefix
  struct waiter {
    std::string agent, label, key;
    etcd_watcher::id wid = 0;
    clock::time_point deadline;
    clock::time_point retry{};
    std::promise<void> done;
  };
  std::list<waiter> waiters;

  explicit state(const context& ctx) : store_context(ctx) {}

  std::string key(std::string_view agent, std::string_view label) const {
    return fmt::format("{}/{}/{}", cfg.etcd_namespace, agent, label);
  }
  std::string prefix(std::string_view agent) const {
    return fmt::format("{}/{}/", cfg.etcd_namespace, agent);
  }

  void ensure_lease() {
    if (lease != 0) return;
    lease = etcd->lease_grant(cfg.etcd_lease_ttl);
    next_keepalive = clock::now() + keepalive_period();
    log::debug("metadata (etcd): lease {:x} granted for '{}'", lease, name);
  }

  std::chrono::milliseconds keepalive_period() const {
    auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.etcd_lease_ttl);
    return std::max<std::chrono::milliseconds>(ttl / 3, 200ms);
  }

  void keepalive() {
    if (lease == 0 || clock::now() < next_keepalive) return;
    try {
      if (etcd->lease_keepalive(lease) > 0) {
        next_keepalive = clock::now() + keepalive_period();
        return;
      }
      // The lease expired (etcd restarted or this process stalled): put our keys back.
      log::warn("metadata (etcd): lease of '{}' expired; publishing {} key(s) again", name,
                published.size());
      lease = 0;
      ensure_lease();
      for (const auto& [label, blob] : published) etcd->put(key(name, label), blob, lease);
    } catch (const std::exception& e) {
      log::warn("metadata (etcd): keep-alive of '{}' failed: {}", name, e.what());
      next_keepalive = clock::now() + 1s;
    }
  }

  /// Loads a peer's value and starts watching the peer.
  void load_central(std::string_view agent, std::string_view k, const std::string& value,
                    std::int64_t revision) {
    std::string got;
    try {
      got = h.load(bytes_of(value));
    } catch (...) {
      auto [s, msg] = describe(std::current_exception());
      nixl::raise(s, "fetch_central: loading '{}': {}", k, msg);
    }
    if (got != agent) {
      nixl::raise(status::mismatch,
                  "fetch_central: key '{}' holds metadata of agent '{}', not '{}'", k, got, agent);
    }
    watch_peer(agent, revision);
  }

  void watch_peer(std::string_view agent, std::int64_t revision) {
    auto it = peers.find(agent);
    if (it != peers.end() && it->second.wid != 0) return;
    if (it == peers.end()) it = peers.emplace(std::string(agent), peer_watch{}).first;
    it->second.revision = revision;
    it->second.wid = watcher->watch(prefix(agent), true, revision + 1);
  }

  void fetch_central(std::string agent, std::string label, std::promise<void>& done) {
    const std::string k = key(agent, label);
    auto r = etcd->get(k);
    if (!r.kvs.empty() && !r.kvs.front().value.empty()) {
      load_central(agent, k, r.kvs.front().value, r.revision);
      done.set_value();
      return;
    }
    // Not there yet: watch the key and wait, bounded.
    waiter w;
    w.agent = std::move(agent);
    w.label = std::move(label);
    w.key = k;
    w.deadline = clock::now() + std::chrono::duration_cast<clock::duration>(cfg.etcd_watch_timeout);
    w.wid = watcher->watch(k, false, r.revision + 1);
    w.done = std::move(done);
    waiters.push_back(std::move(w));
  }

  void finish_waiter(std::list<waiter>::iterator it, const std::string& value,
                     std::int64_t revision) {
    watcher->cancel(it->wid);
    try {
      load_central(it->agent, it->key, value, revision);
      it->done.set_value();
    } catch (...) {
      auto [s, msg] = describe(std::current_exception());
      log::warn("metadata (etcd): {}", msg);
      it->done.set_exception(std::current_exception());
    }
    waiters.erase(it);
  }

  void handle(const etcd_watcher::update& u) {
    auto w = std::find_if(waiters.begin(), waiters.end(),
                          [&](const waiter& x) { return x.wid == u.watch; });
    if (w != waiters.end()) {
      if (!u.event) {
        log::info("metadata (etcd): watch of '{}' broke ({}); retrying", w->key, u.error);
        w->wid = 0;
        w->retry = clock::now() + 200ms;
      } else if (u.event->type == etcd_event::kind::put && !u.event->value.empty()) {
        finish_waiter(w, u.event->value, u.event->revision);
      }
      return;
    }
    for (auto it = peers.begin(); it != peers.end(); ++it) {
      auto& pw = it->second;
      if (pw.wid != u.watch) continue;
      if (!u.event) {
        log::info("metadata (etcd): watch of '{}' broke ({}); retrying", it->first, u.error);
        pw.wid = 0;
        pw.retry = clock::now() + 200ms;
        return;
      }
      pw.revision = std::max(pw.revision, u.event->revision);
      if (u.event->type == etcd_event::kind::del) {
        std::string agent = it->first;
        watcher->cancel(pw.wid);
        peers.erase(it);
        left(agent);
      }
      return;
    }
  }

  /// A peer's keys are gone: drop it locally.
  void left(const std::string& agent) {
    log::info("metadata (etcd): '{}' left the central store; invalidating it", agent);
    try {
      h.invalidate(agent);
    } catch (const std::exception& e) {
      log::warn("metadata (etcd): invalidating '{}': {}", agent, e.what());
    }
  }

  /// Re-creates broken watches; a peer whose keys are gone meanwhile is invalidated.
  void repair() {
    auto now = clock::now();
    for (auto it = peers.begin(); it != peers.end();) {
      auto& pw = it->second;
      if (pw.wid != 0 || now < pw.retry) {
        ++it;
        continue;
      }
      try {
        auto r = etcd->get_prefix(prefix(it->first));
        if (r.kvs.empty()) {
          std::string agent = it->first;
          it = peers.erase(it);
          left(agent);
          continue;
        }
        pw.revision = r.revision;
        watcher->set_endpoint(etcd->endpoint());  // follows the client's fail-over
        pw.wid = watcher->watch(prefix(it->first), true, r.revision + 1);
      } catch (const std::exception& e) {
        pw.retry = now + 1s;
        log::debug("metadata (etcd): cannot re-watch '{}': {}", it->first, e.what());
      }
      ++it;
    }
    for (auto it = waiters.begin(); it != waiters.end();) {
      auto cur = it++;
      if (cur->wid != 0 || now < cur->retry) continue;
      try {
        auto r = etcd->get(cur->key);
        if (!r.kvs.empty() && !r.kvs.front().value.empty()) {
          finish_waiter(cur, r.kvs.front().value, r.revision);
          continue;
        }
        watcher->set_endpoint(etcd->endpoint());
        cur->wid = watcher->watch(cur->key, false, r.revision + 1);
      } catch (const std::exception& e) {
        cur->retry = now + 500ms;
        log::debug("metadata (etcd): cannot re-watch '{}': {}", cur->key, e.what());
      }
    }
  }

  void expire_waiters() {
    auto now = clock::now();
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.etcd_watch_timeout);
      std::string msg = fmt::format(
          "fetch_central: no metadata of agent '{}' under '{}' after {} ms; is the agent running "
          "and has it published (send_local_metadata / label '{}')?",
          it->agent, it->key, ms.count(), it->label);
      log::warn("metadata (etcd): {}", msg);
      if (it->wid != 0) watcher->cancel(it->wid);
      it->done.set_exception(make_error(status::not_found, std::move(msg)));
      it = waiters.erase(it);
    }
  }

  void etcd_loop() {
    std::vector<etcd_watcher::update> updates;
    while (!tasks.stopped()) {
      tasks.run();
      keepalive();
      repair();
      auto now = clock::now();
      auto next = now + 250ms;
      if (lease != 0) next = std::min(next, next_keepalive);
      for (auto& w : waiters) next = std::min(next, w.deadline);
      updates.clear();
      try {
        watcher->poll(
            std::chrono::ceil<std::chrono::milliseconds>(std::max(next - now, clock::duration{})),
            updates);
      } catch (const std::exception& e) {
        log::warn("metadata (etcd): watch: {}", e.what());
      }
      for (auto& u : updates) handle(u);
      expire_waiters();
    }
    // Tasks queued before the stop still complete, as far as etcd answers in time.
    tasks.run();
    cancel_waiters(waiters);
  }
};

template <>
central_store::store(const context& ctx) : s_(std::make_unique<state>(ctx)) {
  auto& m = *s_;
  m.etcd = std::make_unique<etcd_client>(m.cfg.etcd_endpoints, m.cfg.etcd_request_timeout);
  m.watcher = std::make_unique<etcd_watcher>(m.etcd->endpoint(), m.cfg.etcd_request_timeout);
  m.etcd_thread = std::thread([&m] { m.etcd_loop(); });
}

template <>
central_store::~store() {
  auto& m = *s_;
  m.tasks.stop();
  if (m.etcd_thread.joinable()) m.etcd_thread.join();
  // Our keys go with the lease now rather than at its expiry.
  if (m.lease != 0) {
    try {
      m.etcd->lease_revoke(m.lease);
    } catch (const std::exception& e) {
      log::warn("metadata (etcd): revoking the lease of '{}': {} (keys expire with it)", m.name,
                e.what());
    }
  }
}

template <>
std::future<void> central_store::publish(std::string_view label, std::string blob) {
  auto& m = *s_;
  check_publish(label, m.name, blob);
  return m.tasks.post(
      [&m, label = std::string(label), blob = std::move(blob)](std::promise<void>& p) {
        m.ensure_lease();
        m.etcd->put(m.key(m.name, label), blob, m.lease);
        m.published[label] = blob;
        log::debug("metadata (etcd): published '{}'", m.key(m.name, label));
        p.set_value();
      });
}

template <>
std::future<void> central_store::fetch(std::string_view agent, std::string_view label) {
  auto& m = *s_;
  check_fetch(agent, label);
  return m.tasks.post([&m, agent = std::string(agent), label = std::string(label)](
                          std::promise<void>& p) { m.fetch_central(agent, label, p); });
}

template <>
std::future<void> central_store::unpublish() {
  auto& m = *s_;
  check_name("agent name", "invalidate_local_metadata", m.name);
  return m.tasks.post([&m](std::promise<void>& p) {
    auto n = m.etcd->delete_prefix(m.prefix(m.name));
    m.published.clear();
    log::debug("metadata (etcd): deleted {} key(s) of '{}'", n, m.name);
    p.set_value();
  });
}

template <>
std::string central_store::key(std::string_view agent, std::string_view label) const {
  return s_->key(agent, label);
}

}  // namespace nixl::metadata::detail
