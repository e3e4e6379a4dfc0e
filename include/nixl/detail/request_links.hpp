#pragma once
/// `request_links`: the requests of one agent that still hold backend state. The agent lets
/// go of them when it is destroyed, so that a request may outlive its agent: it then answers
/// as a released request (docs/architecture.md, "Peers, generations and dead peers").

#include <mutex>
#include <utility>

namespace nixl::detail {

class request_links;

/// A request's place in its agent's list. The request that holds it sets `self` and `detach`.
struct request_link {
  using detach_fn = void (*)(void* self) noexcept;
  request_link(void* s, detach_fn d) noexcept : self(s), detach(d) {}
  request_link(const request_link&) = delete;
  request_link& operator=(const request_link&) = delete;

  void* self;
  detach_fn detach;                ///< called by the agent: the request lets go of its backend
  request_links* owner = nullptr;  ///< null when not listed
  request_link* prev = nullptr;
  request_link* next = nullptr;
};

class request_links {
 public:
  request_links() = default;
  request_links(const request_links&) = delete;
  request_links& operator=(const request_links&) = delete;

  void add(request_link& l) noexcept {
    std::lock_guard lk(mu_);
    l.owner = this;
    l.prev = nullptr;
    l.next = head_;
    if (head_ != nullptr) head_->prev = &l;
    head_ = &l;
  }
  void remove(request_link& l) noexcept {
    std::lock_guard lk(mu_);
    unlink(l);
  }
  /// `to` takes the place of `from` (the request moved).
  void replace(request_link& from, request_link& to) noexcept {
    std::lock_guard lk(mu_);
    to.owner = this;
    to.prev = std::exchange(from.prev, nullptr);
    to.next = std::exchange(from.next, nullptr);
    if (to.prev != nullptr) to.prev->next = &to;
    if (to.next != nullptr) to.next->prev = &to;
    if (head_ == &from) head_ = &to;
    from.owner = nullptr;
  }
  /// Detaches every request listed, one at a time, each taken off the list before its
  /// `detach` runs (outside the lock, so that it may release through its backend).
  void detach_all() noexcept {
    for (;;) {
      request_link* l = nullptr;
      {
        std::lock_guard lk(mu_);
        l = head_;
        if (l == nullptr) return;
        unlink(*l);
      }
      l->detach(l->self);
    }
  }

 private:
  void unlink(request_link& l) noexcept {
    if (l.owner != this) return;
    if (l.prev != nullptr) l.prev->next = l.next;
    if (l.next != nullptr) l.next->prev = l.prev;
    if (head_ == &l) head_ = l.next;
    l.owner = nullptr;
    l.prev = l.next = nullptr;
  }

  std::mutex mu_;
  request_link* head_ = nullptr;
};

}  // namespace nixl::detail
