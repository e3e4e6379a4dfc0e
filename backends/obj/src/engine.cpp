// The HTTP engine shared by the object store backends: one thread drives libcurl multi (requests
// in flight up to `max_inflight`, connections reused), with a deadline on every request and
// retries with exponential back-off on the answers and transport errors that allow them. The
// store's dialect (s3.cpp, azure.cpp) gives URLs, signatures and error meanings.

#include <curl/curl.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nixl/backends/obj/check.hpp>
#include <nixl/detail/poll_watch.hpp>
#include <nixl/log.hpp>

#include "gpu.hpp"
#include "internal.hpp"

namespace nixl::obj::detail {

void http_op::reset_results() noexcept {
  up_pos = down_len = 0;
  overflow = false;
  http = 0;
  curl_code = 0;
  curl_error.clear();
  body.clear();
  etag.clear();
  error_header.clear();
  content_length.clear();
  last_modified.clear();
}

namespace {

std::once_flag curl_once;

bool iequal_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size() + 1 || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string header_value(std::string_view line, std::size_t name_len) {
  std::string_view v = line.substr(name_len + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
    v.remove_suffix(1);
  return std::string(v.substr(0, 1024));
}

bool retryable_http(long code) {
  return code == 500 || code == 502 || code == 503 || code == 504 || code == 429 || code == 408;
}

bool retryable_curl(int code) {
  switch (static_cast<CURLcode>(code)) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_COULDNT_RESOLVE_HOST:
      return true;
    default:
      return false;
  }
}

}  // namespace

/// The engine: a thread, a curl multi handle, the queues.
class engine {
 public:
  engine(std::unique_ptr<dialect> d, http_config cfg, std::string agent, gpu_stage& gpu)
      : d_(std::move(d)), cfg_(std::move(cfg)), agent_(std::move(agent)), gpu_(gpu) {
    std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi_ = curl_multi_init();
    if (multi_ == nullptr) raise(status::backend, "{}: curl_multi_init failed", d_->name());
    NIXL_CURLM_CHECK(curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS,
                                       static_cast<long>(cfg_.max_connections)));
    NIXL_CURLM_CHECK(
        curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(cfg_.max_connections)));
    thread_ = std::thread([this] { run(); });
  }
  ~engine() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    NIXL_CURLM_WARN(curl_multi_wakeup(multi_));
    thread_.join();
    for (CURL* e : pool_) curl_easy_cleanup(e);
    NIXL_CURLM_WARN(curl_multi_cleanup(multi_));
  }

  dialect& dia() noexcept { return *d_; }
  store_stats stats() const noexcept {
    return {attempts_.load(std::memory_order_relaxed), retries_.load(std::memory_order_relaxed)};
  }
  const http_config& cfg() const noexcept { return cfg_; }

  /// Queues the request for the thread, without a lock (a push on the submission stack). While
  /// an application thread polls (the poll watch's window, nixl/detail/poll_watch.hpp) the post
  /// does not wake the thread: the next status check does (take_up), and the thread sleeps at
  /// most a tick meanwhile. On a busy machine the woken thread takes the poster's core, and the
  /// post returned a time slice later (docs/obj.md, "Posting"). `wake`: wake it in any case.
  status post(xfer& x, bool wake = false) noexcept {
    if (x.state.busy()) return status::repost_active;
    x.state.start();
    x.next_submit = submit_.load(std::memory_order_relaxed);
    while (!submit_.compare_exchange_weak(x.next_submit, &x, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
    }
    // seq_cst, after the push: the thread closes the window before it takes the submissions, so
    // either it takes this one or this sees the window closed and wakes it.
    if (!wake && polls_.open()) {
      wake_due_.store(true, std::memory_order_relaxed);
      return status::in_progress;
    }
    curl_multi_wakeup(multi_);
    return status::in_progress;
  }

  /// A status check of a request in flight: counts as a poll, and wakes the thread for the
  /// posts that left that to it.
  void take_up() noexcept {
    polls_.poll();
    if (wake_due_.load(std::memory_order_relaxed) &&
        wake_due_.exchange(false, std::memory_order_relaxed))
      curl_multi_wakeup(multi_);
  }
  /// True while the thread counts an application thread as polling (a test's probe).
  bool polled() const noexcept { return polls_.open(); }

  void cancel_and_wait(xfer& x) noexcept {
    std::unique_lock l(mu_);
    if (!x.state.busy()) return;
    if (!x.cancel_queued) {
      x.cancel_queued = true;
      x.next_cancel = cancel_;
      cancel_ = &x;
    }
    l.unlock();
    curl_multi_wakeup(multi_);
    l.lock();
    cv_.wait(l, [&] { return !x.state.busy(); });
  }

  /// Posts and waits for the end, bounded: the deadline of every operation and its stages.
  void run_sync(xfer& x) {
    if (post(x, true) != status::in_progress)
      raise(status::repost_active, "{}: request already in flight", d_->name());
    const auto limit = cfg_.request_timeout * 4 + std::chrono::seconds(5);
    std::unique_lock l(mu_);
    if (!cv_.wait_for(l, limit, [&] { return !x.state.busy(); })) {
      l.unlock();
      cancel_and_wait(x);
      raise(status::backend, "{}: no answer within {} ms", d_->name(), limit.count());
    }
  }

 private:
  void run() noexcept {
    std::vector<xfer*> started, canceled;
    nixl::detail::poll_window window;
    while (true) {
      bool ended_here = false;
      // Before the submissions are taken (post reads the window after its push).
      const bool polled =
          window.update(polls_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
      {
        std::lock_guard l(mu_);
        if (stop_) break;
        // Cleared first: a post after the exchange keeps its wake-up for take_up.
        wake_due_.store(false, std::memory_order_relaxed);
        for (xfer* x = submit_.exchange(nullptr, std::memory_order_seq_cst); x != nullptr;
             x = x->next_submit)
          started.push_back(x);
        for (xfer* x = cancel_; x != nullptr; x = x->next_cancel) {
          x->cancel_queued = false;
          // Posted and canceled before it started: it ends here, and is not touched again (its
          // owner may free it as soon as it sees the end).
          if (auto it = std::find(started.begin(), started.end(), x); it != started.end()) {
            started.erase(it);
            x->result = status::canceled;
            x->error = "canceled before it started";
            (void)x->state.finish(status::canceled);
            ended_here = true;
          } else {
            canceled.push_back(x);
          }
        }
        cancel_ = nullptr;
      }
      if (ended_here) cv_.notify_all();
      // Aborts of failed uploads that have ended.
      std::erase_if(orphans_, [](const std::unique_ptr<xfer>& o) { return !o->state.busy(); });
      // Submissions came in last-first; start them in order.
      for (auto it = started.rbegin(); it != started.rend(); ++it) start(**it);
      started.clear();
      // Running requests to cancel (one that ended meanwhile left the cancel list when it ended).
      for (xfer* x : canceled) fail(*x, status::canceled, "canceled");
      canceled.clear();
      pump();
      int running = 0;
      curl_multi_perform(multi_, &running);
      int left = 0;
      while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
        if (m->msg != CURLMSG_DONE) continue;
        void* p = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
        finished(*static_cast<http_op*>(p), m->data.result);
      }
      pump();
      // Polled: a post may have left its wake-up to a status check that does not come.
      int timeout = polled ? nixl::detail::poll_watch::tick_ms : 200;
      const auto now = clock::now();
      if (!ready_.empty() && inflight_.size() < cfg_.max_inflight) timeout = 0;
      for (http_op* op : waiting_)
        timeout = std::min<int>(
            timeout,
            static_cast<int>(std::max<long long>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(op->not_before - now)
                           .count() +
                       1)));
      curl_multi_poll(multi_, nullptr, 0, timeout, nullptr);
    }
    // Shutting down: what is left is dropped (requests never outlive their agent).
    for (http_op* op : inflight_) drop_handle(*op);
    inflight_.clear();
  }

  /// Resets the request and builds the first stage of each job.
  void start(xfer& x) noexcept {
    x.result = status::success;
    x.error.clear();
    x.failing = false;
    x.reported = false;
    x.jobs_left = x.jobs.size();
    x.ops_active = 0;
    for (job& j : x.jobs) {
      j.stage = 0;
      if (j.kind != job_kind::abort_upload) j.upload_id.clear();
      j.found = false;
      advance(j, /*first=*/true);
      if (x.failing) break;
    }
    settle(x);
  }

  /// Builds the job's next stage and queues it, or counts the job done.
  void advance(job& j, bool first) noexcept {
    xfer& x = *j.owner;
    bool more = false;
    try {
      if (!first) ++j.stage;
      more = d_->build_stage(j, cfg_);
    } catch (const nixl::error& e) {
      fail(x, static_cast<status>(e.code().value()), e.what());
      return;
    } catch (const std::exception& e) {
      fail(x, status::backend, e.what());
      return;
    }
    if (!more || j.ops.empty()) {
      --x.jobs_left;
      return;
    }
    j.ops_left = j.ops.size();
    for (http_op& op : j.ops) {
      op.owner = &j;
      op.attempt = 0;
      op.deadline = {};  // set when it is first sent: time queued here does not count
      op.not_before = {};
      if (!op.up_text.empty()) {
        op.up = reinterpret_cast<const std::byte*>(op.up_text.data());
        op.up_len = op.up_text.size();
      }
      op.reset_results();
      op.staging = nullptr;
      op.gpu_mem = nullptr;
      if (j.gpu >= 0 && op.up_text.empty() &&
          ((op.up != nullptr && op.up_len > 0) || (op.down != nullptr && op.down_cap > 0))) {
        // GPU bytes: wait for room in the staging pool (pump).
        op.gpu_put = op.up != nullptr;
        op.gpu_mem = op.gpu_put ? const_cast<std::byte*>(op.up) : op.down;
        op.gpu_len = op.gpu_put ? op.up_len : op.down_cap;
        stage_wait_.push_back(&op);
      } else {
        ready_.push_back(&op);
      }
      ++x.ops_active;
    }
  }

  /// Ends the request when nothing of it is left.
  void settle(xfer& x) noexcept {
    if (!x.state.busy()) return;
    if (x.failing) {
      if (x.ops_active == 0) finish_xfer(x, x.result);
    } else if (x.jobs_left == 0 && x.ops_active == 0) {
      finish_xfer(x, status::success);
    }
  }

  /// Ends the request with `s`.
  void finish_xfer(xfer& x, status s) noexcept {
    if (s != status::success && s != status::canceled && !x.jobs.empty() &&
        x.jobs[0].kind == job_kind::abort_upload)
      log::warn("{}: could not abort a failed multipart upload: {}", d_->name(), x.error);
    {
      std::lock_guard l(mu_);
      if (x.cancel_queued) {  // its owner may free it once it sees the end: off the cancel list
        for (xfer** at = &cancel_; *at != nullptr; at = &(*at)->next_cancel)
          if (*at == &x) {
            *at = x.next_cancel;
            break;
          }
        x.cancel_queued = false;
      }
      (void)x.state.finish(s);  // never detached: the owner waits for the end
    }
    cv_.notify_all();
  }

  /// Marks the request failed (the first failure's message wins) and drops the rest of it.
  void fail(xfer& x, status s, std::string msg) noexcept {
    if (!x.failing) {
      x.failing = true;
      x.result = s;
      x.error = std::move(msg);
      abort_uploads(x);
    }
    auto mine = [&](http_op* op) { return op->owner->owner == &x; };
    for (auto* q : {&ready_, &waiting_, &stage_wait_}) {
      for (http_op* op : *q)
        if (mine(op)) unstage(*op);
      const auto n = std::count_if(q->begin(), q->end(), mine);
      q->erase(std::remove_if(q->begin(), q->end(), mine), q->end());
      x.ops_active -= static_cast<std::size_t>(n);
    }
    for (auto it = inflight_.begin(); it != inflight_.end();) {
      if (mine(*it)) {
        drop_handle(**it);
        unstage(**it);
        --x.ops_active;
        it = inflight_.erase(it);
      } else {
        ++it;
      }
    }
    settle(x);
  }

  /// Gives up the multipart uploads that `x`'s writes had started and not completed, so that the
  /// store does not keep their parts; each in a request of its own that nobody waits for.
  void abort_uploads(xfer& x) noexcept {
    for (job& j : x.jobs) {
      if (j.kind != job_kind::put || j.upload_id.empty() || j.stage > 2) continue;
      try {
        auto o = std::make_unique<xfer>();
        o->eng = this;
        o->jobs.resize(1);
        job& a = o->jobs[0];
        a.owner = o.get();
        a.kind = job_kind::abort_upload;
        a.key = j.key;
        a.upload_id = j.upload_id;
        o->state.start();
        orphans_.push_back(std::move(o));
        start(*orphans_.back());
      } catch (...) {  // out of memory: the parts stay until the bucket's lifecycle rule
      }
    }
  }

  /// Starts queued operations up to the limit, moving due retries to the queue first.
  void pump() noexcept {
    // GPU bodies in order of arrival, as far as the staging pool has room: a PUT's bytes are
    // copied to the staging chunk now (its retries resend them from there), a GET's answer
    // lands there and is copied to the GPU when it ends.
    while (!stage_wait_.empty()) {
      http_op& op = *stage_wait_.front();
      std::byte* p = gpu_.acquire(op.gpu_len);
      if (p == nullptr && gpu_.in_use() == 0) {
        // Nothing will give bytes back: the pool lost too much to copies that did not end.
        stage_wait_.pop_front();
        xfer& x = *op.owner->owner;
        --x.ops_active;
        fail(x, status::backend,
             fmt::format("{}: the VRAM staging pool (vram_staging_bytes {}) has no room for {} "
                         "bytes; {} bytes of it are held by GPU copies that did not end",
                         describe(op, *d_), gpu_.pool_bytes(), op.gpu_len, gpu_.lost()));
        continue;
      }
      if (p == nullptr) break;
      stage_wait_.pop_front();
      op.staging = p;
      if (op.gpu_put) {
        std::string err;
        bool poisoned = false;
        if (!gpu_.to_host(op.owner->gpu, p, op.gpu_mem, op.gpu_len, err, poisoned)) {
          if (poisoned) {  // the copy may still write there: keep it out of the pool
            gpu_.forget(op.gpu_len);
            op.staging = nullptr;
          }
          unstage(op);
          xfer& x = *op.owner->owner;
          --x.ops_active;
          fail(x, status::backend, fmt::format("{}: {}", describe(op, *d_), err));
          continue;
        }
        op.up = p;
      } else {
        op.down = p;
      }
      ready_.push_back(&op);
    }
    const auto now = clock::now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->not_before <= now) {
        ready_.push_back(*it);
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    while (!ready_.empty() && inflight_.size() < cfg_.max_inflight) {
      http_op* op = ready_.front();
      ready_.pop_front();
      launch(*op);
    }
  }

  static std::size_t on_read(char* buf, std::size_t size, std::size_t n, void* p) {
    auto* op = static_cast<http_op*>(p);
    const std::size_t k = std::min(size * n, op->up_len - op->up_pos);
    if (k) std::memcpy(buf, op->up + op->up_pos, k);
    op->up_pos += k;
    return k;
  }
  static int on_seek(void* p, curl_off_t off, int origin) {
    auto* op = static_cast<http_op*>(p);
    if (origin != SEEK_SET || off < 0 || static_cast<std::size_t>(off) > op->up_len)
      return CURL_SEEKFUNC_CANTSEEK;
    op->up_pos = static_cast<std::size_t>(off);
    return CURL_SEEKFUNC_OK;
  }
  static std::size_t on_write(char* data, std::size_t size, std::size_t n, void* p) {
    auto* op = static_cast<http_op*>(p);
    const std::size_t k = size * n;
    if (op->http == 0)
      curl_easy_getinfo(static_cast<CURL*>(op->easy), CURLINFO_RESPONSE_CODE, &op->http);
    if (op->http >= 200 && op->http < 300 && op->down != nullptr && !op->keep_body) {
      if (k > op->down_cap - op->down_len) {
        op->overflow = true;
        return 0;  // aborts the transfer: more than asked for
      }
      std::memcpy(op->down + op->down_len, data, k);
      op->down_len += k;
      return k;
    }
    const std::size_t keep = std::min(k, max_body - std::min(max_body, op->body.size()));
    op->body.append(data, keep);
    return k;
  }
  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* p) {
    auto* op = static_cast<http_op*>(p);
    std::string_view line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after 100 Continue): start over
      op->etag.clear();
      op->error_header.clear();
      op->content_length.clear();
      op->http = 0;
    } else if (iequal_prefix(line, "etag")) {
      op->etag = header_value(line, 4);
    } else if (iequal_prefix(line, "x-ms-error-code")) {
      op->error_header = header_value(line, 15);
    } else if (iequal_prefix(line, "content-length")) {
      op->content_length = header_value(line, 14);
    } else if (iequal_prefix(line, "last-modified")) {
      op->last_modified = header_value(line, 13);
    }
    return size * n;
  }

  void launch(http_op& op) noexcept {
    xfer& x = *op.owner->owner;
    const auto now = clock::now();
    if (op.deadline == clock::time_point{}) op.deadline = now + cfg_.request_timeout;
    if (now >= op.deadline) {
      unstage(op);
      --x.ops_active;
      fail(x, status::backend,
           fmt::format("{}: no answer within the deadline of {} ms (request_timeout_ms) after {} "
                       "attempts",
                       describe(op, *d_), cfg_.request_timeout.count(), op.attempt));
      return;
    }
    std::vector<std::string> lines;
    try {
      lines = d_->sign(op);
    } catch (const std::exception& e) {
      unstage(op);
      --x.ops_active;
      fail(x, status::backend, fmt::format("{}: {}", describe(op, *d_), e.what()));
      return;
    }
    CURL* e = nullptr;
    if (!pool_.empty()) {
      e = pool_.back();
      pool_.pop_back();
      curl_easy_reset(e);
    } else {
      e = curl_easy_init();
    }
    if (e == nullptr) {
      unstage(op);
      --x.ops_active;
      fail(x, status::backend, "curl_easy_init failed");
      return;
    }
    op.easy = e;
    op.reset_results();
    for (const auto& l : lines) op.slist = curl_slist_append(op.slist, l.c_str());
    op.slist = curl_slist_append(op.slist, "Expect:");  // no 100-continue round trip
    op.slist = curl_slist_append(op.slist, "Accept:");
    const std::string url = d_->base_url() + op.path + (op.query.empty() ? "" : "?" + op.query);
    const long left_ms = std::max<long>(
        1, static_cast<long>(
               std::chrono::duration_cast<std::chrono::milliseconds>(op.deadline - now).count()));
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, &op);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, op.slist);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     std::min<long>(left_ms, static_cast<long>(cfg_.connect_timeout.count())));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &op);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &op);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L << 10);
    curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    if (!cfg_.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, cfg_.ca_bundle.c_str());
    if (!cfg_.verify_tls) {
      curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (op.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (op.method == "PUT") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(op.up_len));
      curl_easy_setopt(e, CURLOPT_READFUNCTION, &on_read);
      curl_easy_setopt(e, CURLOPT_READDATA, &op);
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, &on_seek);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, &op);
    } else if (op.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(op.up_len));
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, op.up_len ? static_cast<const void*>(op.up) : "");
    } else if (op.method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, op.method.c_str());
    }
    if (curl_multi_add_handle(multi_, e) != CURLM_OK) {
      drop_handle(op);
      unstage(op);
      --x.ops_active;
      fail(x, status::backend, "curl_multi_add_handle failed");
      return;
    }
    inflight_.push_back(&op);
    attempts_.fetch_add(1, std::memory_order_relaxed);
    if (op.attempt > 0) retries_.fetch_add(1, std::memory_order_relaxed);
  }

  /// Gives the operation's staging chunk back to the pool.
  void unstage(http_op& op) noexcept {
    if (op.staging != nullptr) gpu_.release(op.staging, op.gpu_len);
    op.staging = nullptr;
  }

  void drop_handle(http_op& op) noexcept {
    if (op.easy != nullptr) {
      curl_multi_remove_handle(multi_, static_cast<CURL*>(op.easy));
      pool_.push_back(static_cast<CURL*>(op.easy));
      op.easy = nullptr;
    }
    curl_slist_free_all(op.slist);
    op.slist = nullptr;
  }

  std::chrono::milliseconds backoff(unsigned attempt) {
    const auto base = cfg_.retry_backoff.count() << std::min(attempt, 16u);
    const auto cap = std::min<long long>(base, cfg_.retry_backoff_max.count());
    std::uniform_int_distribution<long long> jitter(cap / 2, std::max<long long>(cap, 1));
    return std::chrono::milliseconds(jitter(rng_));
  }

  /// One attempt ended: succeed, retry, or fail the request.
  void finished(http_op& op, CURLcode rc) noexcept {
    curl_easy_getinfo(static_cast<CURL*>(op.easy), CURLINFO_RESPONSE_CODE, &op.http);
    drop_handle(op);
    inflight_.erase(std::find(inflight_.begin(), inflight_.end(), &op));
    job& j = *op.owner;
    xfer& x = *j.owner;
    op.curl_code = rc;
    const bool accepted = rc == CURLE_OK && ((op.http >= 200 && op.http < 300) ||
                                             (j.kind == job_kind::head && op.http == 404) ||
                                             (j.kind == job_kind::make_bucket && op.http == 409));
    if (!accepted && !op.overflow) {
      const bool may_retry = rc != CURLE_OK ? retryable_curl(rc) : retryable_http(op.http);
      if (may_retry && op.attempt < cfg_.max_retries) {
        const auto wait = backoff(op.attempt);
        if (clock::now() + wait < op.deadline) {
          log::debug("{}: {} (attempt {}); retrying in {} ms", d_->name(),
                     rc != CURLE_OK ? curl_easy_strerror(rc) : fmt::format("HTTP {}", op.http),
                     op.attempt + 1, wait.count());
          ++op.attempt;
          op.not_before = clock::now() + wait;
          waiting_.push_back(&op);
          return;
        }
      }
    }
    --x.ops_active;
    std::string gpu_err;
    if (op.staging != nullptr) {
      bool poisoned = false;
      if (accepted && !op.overflow && j.kind == job_kind::get && op.down_len == op.down_cap &&
          !op.gpu_put &&
          !gpu_.to_device(j.gpu, op.gpu_mem, op.staging, op.down_len, gpu_err, poisoned)) {
        gpu_err = fmt::format("{}: {}", describe(op, *d_), gpu_err);
        if (poisoned) {  // the copy may still read there: keep it out of the pool
          gpu_.forget(op.gpu_len);
          op.staging = nullptr;
        }
      }
      unstage(op);
    }
    if (op.overflow) {
      fail(x, status::backend,
           fmt::format("{}: the server sent more than the {} bytes asked for", describe(op, *d_),
                       op.down_cap));
      return;
    }
    if (rc != CURLE_OK) {
      const bool timed_out = rc == CURLE_OPERATION_TIMEDOUT;
      fail(x, status::backend,
           fmt::format("{}: {}{} after {} attempt(s){}", describe(op, *d_), curl_easy_strerror(rc),
                       timed_out ? fmt::format(" (deadline {} ms, request_timeout_ms)",
                                               cfg_.request_timeout.count())
                                 : std::string{},
                       op.attempt + 1,
                       rc == CURLE_COULDNT_CONNECT
                           ? fmt::format("; is the server at {} running?", d_->base_url())
                           : std::string{}));
      return;
    }
    if (!accepted) {
      std::string msg;
      const status s = d_->map_error(op, msg);
      fail(x, s, std::move(msg));
      return;
    }
    if (j.kind == job_kind::get && op.down_len != op.down_cap) {
      fail(x, status::invalid_param,
           fmt::format("{}: got {} bytes of the {} asked for (the object ends before the range "
                       "does)",
                       describe(op, *d_), op.down_len, op.down_cap));
      return;
    }
    if (!gpu_err.empty()) {
      fail(x, status::backend, std::move(gpu_err));
      return;
    }
    if (j.kind == job_kind::head) {
      j.found = op.http != 404;
      if (j.found)
        j.info = {
            {"size", op.content_length}, {"etag", op.etag}, {"last_modified", op.last_modified}};
    }
    if (--j.ops_left == 0 && !x.failing) advance(j, false);
    settle(x);
  }

  std::unique_ptr<dialect> d_;
  http_config cfg_;
  std::string agent_;
  gpu_stage& gpu_;
  CURLM* multi_ = nullptr;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<xfer*> submit_{nullptr};  // posted, not taken yet (a stack: last first)
  xfer* cancel_ = nullptr;
  nixl::detail::poll_watch polls_;     // status checks of requests in flight (take_up)
  std::atomic<bool> wake_due_{false};  // a post left the thread's wake-up to take_up
  // Engine thread only.
  std::deque<http_op*> ready_;
  std::deque<http_op*> waiting_;
  std::deque<http_op*> stage_wait_;  // GPU bodies waiting for room in the staging pool
  std::vector<http_op*> inflight_;
  std::vector<CURL*> pool_;
  std::vector<std::unique_ptr<xfer>> orphans_;
  std::minstd_rand rng_{std::random_device{}()};
  std::atomic<std::uint64_t> attempts_{0}, retries_{0};
};

class store {
 public:
  explicit store(std::unique_ptr<dialect> d, const http_config& cfg, std::string agent)
      : gpu(d->name(), cfg.vram_staging_bytes, std::max(cfg.multipart_threshold, cfg.part_size),
            cfg.request_timeout),
        eng(std::move(d), cfg, std::move(agent), gpu) {}
  gpu_stage gpu;  // outlives the engine's thread
  engine eng;
};

void store_deleter::operator()(store* s) const noexcept {
  delete s;
}

void xfer_deleter::operator()(xfer* x) const noexcept {
  if (x == nullptr) return;
  if (x->eng != nullptr) x->eng->cancel_and_wait(*x);
  delete x;
}

store_ptr make_s3_store(const obj::config& cfg, const nixl::backend_context& ctx) {
  return store_ptr(new store(make_s3_dialect(cfg), cfg.http, ctx.agent_name));
}

store_ptr make_azure_store(const azure_blob::config& cfg, const nixl::backend_context& ctx) {
  return store_ptr(new store(make_azure_dialect(cfg), cfg.http, ctx.agent_name));
}

int attach_vram(store& s, const nixl::reg_desc& d) {
  return s.gpu.attach(static_cast<std::uintptr_t>(d.addr), d.len, d.dev);
}

std::string_view store_name(const store& s) noexcept {
  return const_cast<store&>(s).eng.dia().name();
}

store_stats stats(const store& s) noexcept {
  return s.eng.stats();
}

xfer_ptr make_xfer(store& s, std::vector<object_io> ios) {
  xfer_ptr x(new xfer);
  x->eng = &s.eng;
  x->jobs.resize(ios.size());
  for (std::size_t i = 0; i < ios.size(); ++i) {
    job& j = x->jobs[i];
    j.owner = x.get();
    j.kind = ios[i].write ? job_kind::put : job_kind::get;
    j.key = std::move(ios[i].key);
    j.mem = ios[i].mem;
    j.offset = ios[i].offset;
    j.len = ios[i].len;
    j.gpu = ios[i].gpu;
    if (j.kind == job_kind::put && j.offset != 0)
      raise(status::invalid_param,
            "{}: object '{}' written at offset {}; objects are written "
            "whole, at offset 0",
            s.eng.dia().name(), j.key, j.offset);
  }
  return x;
}

status post(store& s, xfer& x) noexcept {
  return s.eng.post(x);
}

status check(store& s, xfer& x) noexcept {
  const status r = x.state.result();
  if (!x.state.ended()) {
    s.eng.take_up();
    return r;
  }
  if (r == status::success || r == status::canceled) return r;
  if (!x.reported) {
    x.reported = true;
    try {
      log::error("{}", x.error);
    } catch (...) {
    }
  }
  return r;
}

bool polled(const store& s) noexcept {
  return s.eng.polled();
}

status release(store& s, xfer& x) noexcept {
  s.eng.cancel_and_wait(x);
  return status::success;
}

std::string_view error_text(const xfer& x) noexcept {
  return x.state.ended() && x.state.result() != status::success ? std::string_view(x.error)
                                                                : std::string_view{};
}

std::vector<std::optional<nixl::params>> query(store& s, std::span<const nixl::reg_desc> descs) {
  xfer x;
  x.eng = &s.eng;
  x.jobs.resize(descs.size());
  for (std::size_t i = 0; i < descs.size(); ++i) {
    x.jobs[i].owner = &x;
    x.jobs[i].kind = job_kind::head;
    x.jobs[i].key = descs[i].meta.empty() ? std::to_string(descs[i].dev) : descs[i].meta;
  }
  s.eng.run_sync(x);
  if (x.state.result() != status::success)
    raise(x.result == status::success ? status::backend : x.result, "query_memory: {}", x.error);
  std::vector<std::optional<nixl::params>> out;
  out.reserve(descs.size());
  for (auto& j : x.jobs) {
    if (j.found)
      out.emplace_back(std::move(j.info));
    else
      out.emplace_back(std::nullopt);
  }
  return out;
}

void create_bucket(store& s) {
  xfer x;
  x.eng = &s.eng;
  x.jobs.resize(1);
  x.jobs[0].owner = &x;
  x.jobs[0].kind = job_kind::make_bucket;
  s.eng.run_sync(x);
  if (x.state.result() != status::success)
    raise(x.result == status::success ? status::backend : x.result, "create_bucket: {}", x.error);
}

}  // namespace nixl::obj::detail
