#pragma once
// The target side, as the initiator sees it: a segment of this process (registered with a second
// agent, or with the initiator itself), or the target process reached through notifications.

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "mailbox.hpp"
#include "options.hpp"
#include "segment.hpp"

namespace nixl_bench {

class target_side {
 public:
  virtual ~target_side() = default;
  /// Agent to name in requests (this agent itself for loopback).
  virtual const std::string& agent() const = 0;
  virtual nixl::desc at(std::size_t off, std::size_t len) const = 0;
  virtual nixl::mem_kind kind() const = 0;
  virtual void fill(std::uint32_t seed) = 0;
  virtual std::optional<std::size_t> verify(const nb::layout&, std::size_t count, int threads,
                                            std::uint32_t seed) = 0;
  /// Called while polling: progresses a target of this process that has no progress thread.
  virtual void idle() {}
  virtual void finish() {}
};

/// A segment of this process: registered with a second agent, or with the initiator itself.
class local_target final : public target_side {
 public:
  local_target(bench_agent& initiator, const options& o, std::size_t size) : initiator_(initiator) {
    if (o.local_only()) {
      name_ = initiator.name();
      seg_.emplace(o.target_kind(), size, o, o.target_gpu, "target");
      seg_->register_with(initiator, {{o.backend}});
      return;
    }
    nixl::agent_config cfg;
    cfg.enable_prog_thread = o.enable_pt;
    agent_ = std::make_unique<bench_agent>(target_name, cfg);
    agent_->create_backend(o.backend, backend_params(o));
    seg_.emplace(o.target_kind(), size, o, o.target_gpu, "target", ucx_allocator(*agent_, o));
    seg_->register_with(*agent_);
    initiator.load_remote_metadata(agent_->local_metadata());
    name_ = target_name;
    progress_ = !o.enable_pt;
  }
  ~local_target() override { finish(); }
  const std::string& agent() const override { return name_; }
  nixl::desc at(std::size_t off, std::size_t len) const override { return seg_->at(off, len); }
  nixl::mem_kind kind() const override { return seg_->kind(); }
  void fill(std::uint32_t seed) override { seg_->fill(seed); }
  std::optional<std::size_t> verify(const nb::layout& l, std::size_t c, int t,
                                    std::uint32_t s) override {
    return seg_->verify(l, c, t, s);
  }
  void idle() override {
    // Initiator threads poll at once; one of them progressing the target is enough.
    if (progress_ && progress_mutex_.try_lock()) {
      agent_->progress();
      progress_mutex_.unlock();
    }
  }
  void finish() override {
    if (agent_) {
      try {
        initiator_.invalidate_remote_metadata(target_name);
      } catch (...) {
      }
    }
    seg_.reset();  // deregisters, before its agent goes
    agent_.reset();
  }
  segment& seg() { return *seg_; }

 private:
  bench_agent& initiator_;
  std::unique_ptr<bench_agent> agent_;
  std::optional<segment> seg_;
  std::string name_;
  bool progress_ = false;
  std::mutex progress_mutex_;
};

/// The target process, reached through notifications.
class remote_target final : public target_side {
 public:
  remote_target(bench_agent& a, nixl::xfer_dlist where, pid_t child)
      : initiator_(a), box_(a, target_name), where_(std::move(where)), child_(child) {}
  ~remote_target() override { finish(); }
  const std::string& agent() const override { return name_; }
  nixl::desc at(std::size_t off, std::size_t len) const override {
    return {where_[0].addr + off, len, where_[0].dev};
  }
  nixl::mem_kind kind() const override { return where_.kind(); }
  void fill(std::uint32_t seed) override {
    box_.send(fmt::format("fill {}", seed));
    expect_ok("fill");
  }
  std::optional<std::size_t> verify(const nb::layout& lay, std::size_t count, int threads,
                                    std::uint32_t seed) override {
    box_.send(verify_msg(seed, lay, count, threads));
    auto r = reply("verify");
    if (r == "ok") return std::nullopt;
    if (r.rfind("bad ", 0) == 0) return std::stoull(r.substr(4));
    fail("target: " + r);
  }
  void finish() override {
    if (done_) return;
    done_ = true;
    try {
      box_.send("done");
      if (box_.next(5s) == std::optional<std::string>("bye"))
        initiator_.invalidate_remote_metadata(target_name);
    } catch (...) {
    }
    if (child_ > 0) {
      int st = 0;
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(child_, &st, WNOHANG) == child_) return;
        std::this_thread::sleep_for(50ms);
      }
      ::kill(child_, SIGTERM);
      ::waitpid(child_, &st, 0);
    }
  }

 private:
  std::string reply(const char* what) {
    auto m = box_.next(120s);
    if (!m) fail(fmt::format("the target did not answer '{}' within 120 s", what));
    return *m;
  }
  void expect_ok(const char* what) {
    auto r = reply(what);
    if (r != "ok") fail(fmt::format("target: {}: {}", what, r));
  }
  bench_agent& initiator_;
  mailbox box_;
  nixl::xfer_dlist where_;
  pid_t child_;
  std::string name_ = target_name;
  bool done_ = false;
};

}  // namespace nixl_bench
