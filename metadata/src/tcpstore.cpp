// The TCPStore central store: SET / CHECK+GET / DELETE_KEY of NIXL's keys on a worker thread.
#include "tcpstore.hpp"
#include "store_tasks.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nixl/log.hpp>
#include <nixl/metadata/tcpstore.hpp>
#include <nixl/status.hpp>

namespace nixl::metadata::detail {

using namespace std::chrono_literals;

template <>
struct tcpstore_store::state : store_context {
  tcpstore_client client;

  std::thread worker;
  store_tasks tasks{"tcpstore"};
  std::set<std::string, std::less<>> published;  // worker only

  struct waiter {
    std::string agent, label, key;
    clock::time_point deadline;
    std::string last_error;  // of the last probe, for the final message
    status last_status = status::success;
    std::promise<void> done;
  };
  std::list<waiter> waiters;  // worker only

  explicit state(const context& ctx)
      : store_context(ctx), client(ctx.cfg.tcpstore_endpoint, ctx.cfg.tcpstore_op_timeout) {}

  /// One probe of a waiting fetch: true when it finished (loaded or failed for good).
  bool probe(waiter& w) {
    std::optional<std::string> v;
    try {
      v = client.get(w.key);
    } catch (const nixl::error& e) {
      w.last_error = e.what();  // store away or broken: retried until the deadline
      w.last_status = e.status_code();
      return false;
    }
    if (!v) return false;
    try {
      std::string got = h.load(bytes_of(*v));
      if (got != w.agent)
        nixl::raise(status::mismatch,
                    "fetch_remote_metadata: key '{}' holds metadata of agent '{}', not '{}'", w.key,
                    got, w.agent);
      w.done.set_value();
    } catch (...) {
      auto [s, msg] = describe(std::current_exception());
      log::warn("metadata (tcpstore): loading '{}': {}", w.key, msg);
      w.done.set_exception(std::current_exception());
    }
    return true;
  }

  void expire(clock::time_point now) {
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.tcpstore_timeout);
      status s = it->last_error.empty() ? status::not_found : it->last_status;
      std::string msg =
          it->last_error.empty()
              ? fmt::format(
                    "fetch_remote_metadata: no metadata of agent '{}' under '{}' in the "
                    "TCPStore {} after {} ms; has it published (label '{}')?",
                    it->agent, it->key, client.endpoint(), ms.count(), it->label)
              : fmt::format(
                    "fetch_remote_metadata: agent '{}' ('{}') not fetched within {} ms: "
                    "{}",
                    it->agent, it->key, ms.count(), it->last_error);
      log::warn("metadata (tcpstore): {}", msg);
      it->done.set_exception(make_error(s, std::move(msg)));
      it = waiters.erase(it);
    }
  }

  void loop() {
    while (!tasks.stopped()) {
      tasks.run();
      // Pending fetches: at most ~50 ms of probing per pass, as NIXL.
      auto pass_end = clock::now() + 50ms;
      for (auto it = waiters.begin(); it != waiters.end() && clock::now() < pass_end;) {
        auto cur = it++;
        if (probe(*cur)) waiters.erase(cur);
      }
      expire(clock::now());
      tasks.wait(waiters.empty() ? 0ms : 10ms);
    }
    tasks.run();
    cancel_waiters(waiters);
  }
};

template <>
tcpstore_store::store(const context& ctx) : s_(std::make_unique<state>(ctx)) {
  auto& m = *s_;
  m.worker = std::thread([&m] {
    // The first connect gets the longer budget; a failure is logged and retried later.
    try {
      m.client.connect(
          std::chrono::duration_cast<std::chrono::milliseconds>(m.cfg.tcpstore_timeout));
    } catch (const std::exception& e) {
      log::warn("metadata (tcpstore): {}", e.what());
    }
    m.loop();
  });
}

template <>
tcpstore_store::~store() {
  auto& m = *s_;
  m.tasks.stop();
  if (m.worker.joinable()) m.worker.join();
}

template <>
std::future<void> tcpstore_store::publish(std::string_view label, std::string blob) {
  auto& m = *s_;
  check_publish(label, m.name, blob);
  return m.tasks.post(
      [&m, label = std::string(label), blob = std::move(blob)](std::promise<void>& p) {
        std::string k = tcpstore_key(label, m.name);
        m.published.insert(k);  // remembered even when the SET fails, so invalidate deletes it
        m.client.set(k, blob);
        log::debug("metadata (tcpstore): published '{}'", k);
        p.set_value();
      });
}

template <>
std::future<void> tcpstore_store::fetch(std::string_view agent, std::string_view label) {
  auto& m = *s_;
  check_fetch(agent, label);
  return m.tasks.post([&m, agent = std::string(agent),
                       label = std::string(label)](std::promise<void>& p) {
    state::waiter w;
    w.agent = agent;
    w.label = label;
    w.key = tcpstore_key(label, agent);
    w.deadline = clock::now() + std::chrono::duration_cast<clock::duration>(m.cfg.tcpstore_timeout);
    w.done = std::move(p);
    if (!m.probe(w)) m.waiters.push_back(std::move(w));
  });
}

template <>
std::future<void> tcpstore_store::unpublish() {
  auto& m = *s_;
  check_name("agent name", "invalidate_local_metadata", m.name);
  return m.tasks.post([&m](std::promise<void>& p) {
    // No recursive delete: each key we published; on error the rest stays for a retry.
    for (auto it = m.published.begin(); it != m.published.end();) {
      m.client.remove(*it);
      log::debug("metadata (tcpstore): deleted '{}'", *it);
      it = m.published.erase(it);
    }
    p.set_value();
  });
}

template <>
std::string tcpstore_store::key(std::string_view agent, std::string_view label) const {
  return tcpstore_key(label, agent);
}

}  // namespace nixl::metadata::detail

namespace nixl::metadata::detail {

namespace {
std::chrono::milliseconds env_ms(const char* var, std::chrono::milliseconds fallback) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  std::string_view s(v);
  long long ms = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), ms);
  if (ec != std::errc{} || end != s.data() + s.size() || ms <= 0 || ms > 86'400'000)
    nixl::raise(status::invalid_param,
                "{}='{}' must be a positive number of milliseconds (at most one day)", var, s);
  return std::chrono::milliseconds(ms);
}
}  // namespace

void tcpstore_env(config& c) {
  if (c.tcpstore_endpoint.empty()) {
    if (const char* e = std::getenv("NIXL_TCPSTORE_ENDPOINT")) c.tcpstore_endpoint = e;
  }
  c.tcpstore_timeout = env_ms("NIXL_TCPSTORE_TIMEOUT_MS", c.tcpstore_timeout);
  c.tcpstore_op_timeout = env_ms("NIXL_TCPSTORE_OP_TIMEOUT_MS", c.tcpstore_op_timeout);
}

void tcpstore_check(const config& c) {
  if (c.tcpstore_endpoint.empty()) return;
  if (!c.etcd_endpoints.empty())
    nixl::raise(status::invalid_param,
                "NIXL_ETCD_ENDPOINTS and NIXL_TCPSTORE_ENDPOINT are mutually exclusive");
  (void)parse_tcpstore_endpoint(c.tcpstore_endpoint);
  if (c.tcpstore_timeout.count() <= 0 || c.tcpstore_op_timeout.count() <= 0)
    nixl::raise(status::invalid_param, "TCPStore timeouts must be positive");
}

}  // namespace nixl::metadata::detail
