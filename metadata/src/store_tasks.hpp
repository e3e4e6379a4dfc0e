#pragma once
// The request queue of a central store's worker thread (private header): requests posted from
// any thread run on the worker; one that throws is logged and fails its future. After stop(),
// posting fails at once with status::canceled.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <nixl/log.hpp>
#include "common.hpp"

namespace nixl::metadata::detail {

class store_tasks {
 public:
  /// `who` names the store in log lines ("etcd", "tcpstore"); `wake` (optional) is called
  /// after each post and on stop, for a worker that sleeps elsewhere than in wait().
  explicit store_tasks(std::string who, std::function<void()> wake = {})
      : who_(std::move(who)), wake_(std::move(wake)) {}

  /// Queues `fn` for the worker; it fulfils the promise, or throws to fail it.
  std::future<void> post(std::function<void(std::promise<void>&)> fn) {
    auto p = std::make_shared<std::promise<void>>();
    auto f = p->get_future();
    {
      std::lock_guard lk(mutex_);
      if (stop_) {
        p->set_exception(make_error(status::canceled, "metadata exchange is shutting down"));
        return f;
      }
      tasks_.push_back([p, fn = std::move(fn), this] {
        try {
          fn(*p);
        } catch (...) {
          auto [s, msg] = describe(std::current_exception());
          log::warn("metadata ({}): {}", who_, msg);
          p->set_exception(std::current_exception());
        }
      });
    }
    notify();
    return f;
  }

  /// Runs the requests queued so far (on the worker).
  void run() {
    std::deque<std::function<void()>> todo;
    {
      std::lock_guard lk(mutex_);
      todo.swap(tasks_);
    }
    for (auto& t : todo) t();
  }

  /// Sleeps until a request is queued or stop(); at most `most` unless it is zero.
  void wait(std::chrono::milliseconds most = std::chrono::milliseconds{0}) {
    std::unique_lock lk(mutex_);
    auto ready = [this] { return stop_ || !tasks_.empty(); };
    if (most.count() > 0)
      cv_.wait_for(lk, most, ready);
    else
      cv_.wait(lk, ready);
  }

  /// Refuses further requests and wakes the worker; those already queued still run.
  void stop() {
    {
      std::lock_guard lk(mutex_);
      stop_ = true;
    }
    notify();
  }

  bool stopped() const noexcept { return stop_; }

 private:
  void notify() {
    cv_.notify_one();
    if (wake_) wake_();
  }

  std::string who_;
  std::function<void()> wake_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_
  std::atomic<bool> stop_{false};            // written under mutex_
};

/// Fails every waiting fetch of `waiters` (a list of records with `key` and `done`) because the
/// exchange stopped, and empties it.
template <class Waiters>
void cancel_waiters(Waiters& waiters) {
  for (auto& w : waiters)
    w.done.set_exception(
        make_error(status::canceled, "metadata exchange stopped while waiting for " + w.key));
  waiters.clear();
}

}  // namespace nixl::metadata::detail
