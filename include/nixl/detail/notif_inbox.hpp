#pragma once
/// `notif_inbox`: what a transport's receive path hands to the agent, notifications and abort
/// notices (docs/error-model.md, "Abort notices"), each queued per arrival under one mutex and
/// taken in arrival order.

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/detail/memory.hpp>

namespace nixl::detail {

class notif_inbox {
 public:
  enum class kind : bool { notification, abort };

  /// Queues a message from `sender`; false (and nothing queued) when out of memory. Called by
  /// receive callbacks: never throws.
  bool push(kind k, std::string_view sender, std::string_view msg) noexcept {
    try {
      std::string s(sender), m(msg);
      std::lock_guard lk(mu_);
      (k == kind::abort ? aborts_ : notifs_).emplace_back(std::move(s), std::move(m));
      return true;
    } catch (...) {
      return false;
    }
  }
  /// Appends what arrived of kind `k` to `out`, per sender, and forgets it.
  void take(kind k, notif_map& out) {
    std::vector<std::pair<std::string, std::string>> got;
    {
      std::lock_guard lk(mu_);
      got.swap(k == kind::abort ? aborts_ : notifs_);
    }
    for (auto& [from, msg] : got) out[from].push_back(std::move(msg));
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> notifs_;
  std::vector<std::pair<std::string, std::string>> aborts_;
};

}  // namespace nixl::detail
