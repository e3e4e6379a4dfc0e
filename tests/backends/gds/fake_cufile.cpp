// A small stand-in for libcufile.so.0, built as a shared library of that soname for the GDS
// tests: DRAM only, I/O with pread/pwrite. Batches run on one thread each, in order. Knobs and
// counters for the tests come through nixl_fake_cufile_set/get (found with dlsym):
//   set: delay_us (per I/O), hang (entries wait until canceled or unset), hang_sync
//        (synchronous calls wait until it is unset), hang_submit (cuFileBatchIOSubmit waits until
//        it is unset, before it counts), ignore_cancel
//        (cuFileBatchIOCancel fails and hung entries stay hung), refuse_buf
//        (cuFileBufRegister fails), fail_open (cuFileDriverOpen fails), fail_io (the next I/O
//        fails with EIO)
//   get: driver_refs, handles, buffers, batches, submits, entries, max_entry, sync_calls,
//        max_sync, in_flight, max_in_flight (batch entries submitted and not finished, at
//        most), cancels, sync_threads (distinct threads that made synchronous calls),
//        sync_running, max_sync_running (synchronous calls at once: now, at most), plus every knob;
//        setting a counter sets it (sync_threads: 0 forgets the threads seen)

#include <nixl/backends/gds/cufile.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

using namespace nixl::gds::cufile;

namespace {

struct counters {
  std::atomic<long> driver_refs{0}, handles{0}, buffers{0}, batches{0}, submits{0}, entries{0},
      max_entry{0}, sync_calls{0}, max_sync{0}, in_flight{0}, max_in_flight{0}, cancels{0},
      sync_threads{0}, sync_running{0}, max_sync_running{0};
  std::mutex threads_mu;
  std::vector<std::thread::id> threads_seen;
  std::atomic<long> delay_us{0}, hang{0}, hang_sync{0}, hang_submit{0}, ignore_cancel{0},
      refuse_buf{0}, fail_open{0}, fail_io{0};
};
counters& c() {
  static counters k;
  return k;
}

std::atomic<long>* knob(std::string_view k) {
  auto& s = c();
  if (k == "driver_refs") return &s.driver_refs;
  if (k == "handles") return &s.handles;
  if (k == "buffers") return &s.buffers;
  if (k == "batches") return &s.batches;
  if (k == "submits") return &s.submits;
  if (k == "entries") return &s.entries;
  if (k == "max_entry") return &s.max_entry;
  if (k == "sync_calls") return &s.sync_calls;
  if (k == "max_sync") return &s.max_sync;
  if (k == "in_flight") return &s.in_flight;
  if (k == "cancels") return &s.cancels;
  if (k == "max_in_flight") return &s.max_in_flight;
  if (k == "sync_threads") return &s.sync_threads;
  if (k == "sync_running") return &s.sync_running;
  if (k == "max_sync_running") return &s.max_sync_running;
  if (k == "delay_us") return &s.delay_us;
  if (k == "hang") return &s.hang;
  if (k == "hang_sync") return &s.hang_sync;
  if (k == "hang_submit") return &s.hang_submit;
  if (k == "ignore_cancel") return &s.ignore_cancel;
  if (k == "refuse_buf") return &s.refuse_buf;
  if (k == "fail_open") return &s.fail_open;
  if (k == "fail_io") return &s.fail_io;
  return nullptr;
}

void raise_max(std::atomic<long>& m, long v) {
  long cur = m.load();
  while (v > cur && !m.compare_exchange_weak(cur, v)) {
  }
}

constexpr CUfileError_t ok{CU_FILE_SUCCESS, 0};
constexpr CUfileError_t err(int e) {
  return {e, 0};
}

struct fake_handle {
  int fd;
};

/// Counts a synchronous call: its thread, and the calls running at once.
struct sync_call {
  sync_call() {
    auto& k = c();
    k.sync_calls.fetch_add(1);
    raise_max(k.max_sync_running, k.sync_running.fetch_add(1) + 1);
    // The knob changes without a notification: look again every millisecond.
    while (k.hang_sync.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard g(k.threads_mu);
    const auto me = std::this_thread::get_id();
    if (std::find(k.threads_seen.begin(), k.threads_seen.end(), me) == k.threads_seen.end()) {
      k.threads_seen.push_back(me);
      k.sync_threads.store(static_cast<long>(k.threads_seen.size()));
    }
  }
  ~sync_call() { c().sync_running.fetch_sub(1); }
  sync_call(const sync_call&) = delete;
  sync_call& operator=(const sync_call&) = delete;
};

/// The whole of one I/O: pread/pwrite until done, end of file or an error.
ssize_t do_io(bool write, int fd, char* buf, std::size_t n, off_t off) {
  if (c().fail_io.exchange(0) != 0) {
    errno = EIO;
    return -1;
  }
  if (long d = c().delay_us.load(); d > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(d));
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = write ? ::pwrite(fd, buf + done, n - done, off + static_cast<off_t>(done))
                            : ::pread(fd, buf + done, n - done, off + static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

struct entry {
  CUfileIOParams_t p;
  int status = CUFILE_WAITING;
  std::size_t ret = 0;
  bool reported = false;
};

struct batch {
  unsigned cap = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<entry> entries;
  std::size_t next = 0;  // next entry to run
  bool running = false;  // an entry is being run
  bool cancel = false;
  bool stop = false;
  std::thread worker;

  bool terminal(const entry& e) const { return e.status >= CUFILE_CANCELED; }

  void run() {
    std::unique_lock lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || next < entries.size(); });
      if (stop) return;
      entry& e = entries[next++];
      e.status = CUFILE_PENDING;
      // The knobs change without a notification: look again every millisecond.
      while (!(stop || c().hang.load() == 0 || (cancel && c().ignore_cancel.load() == 0)))
        cv.wait_for(lk, std::chrono::milliseconds(1));
      if (stop) return;
      if (cancel) {
        e.status = CUFILE_CANCELED;
        c().in_flight.fetch_sub(1);
        cv.notify_all();
        continue;
      }
      running = true;
      lk.unlock();
      auto* h = static_cast<fake_handle*>(e.p.fh);
      const ssize_t r =
          do_io(e.p.opcode == CUFILE_WRITE, h->fd,
                static_cast<char*>(e.p.u.batch.devPtr_base) + e.p.u.batch.devPtr_offset,
                e.p.u.batch.size, e.p.u.batch.file_offset);
      const int why = errno;
      lk.lock();
      running = false;
      c().in_flight.fetch_sub(1);
      if (r < 0) {
        e.status = CUFILE_FAILED;
        e.ret = static_cast<std::size_t>(-static_cast<ssize_t>(why));
      } else {
        e.status = CUFILE_COMPLETE;
        e.ret = static_cast<std::size_t>(r);
      }
      cv.notify_all();
    }
  }
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) long nixl_fake_cufile_get(const char* key) {
  auto* k = knob(key);
  return k != nullptr ? k->load() : -1;
}

__attribute__((visibility("default"))) void nixl_fake_cufile_set(const char* key, long v) {
  if (std::string_view(key) == "sync_threads") {
    std::lock_guard g(c().threads_mu);
    c().threads_seen.clear();
  }
  if (auto* k = knob(key)) k->store(v);
}

__attribute__((visibility("default"))) CUfileError_t cuFileDriverOpen() {
  if (c().fail_open.load() != 0) return err(CU_FILE_DRIVER_NOT_INITIALIZED);
  c().driver_refs.fetch_add(1);
  return ok;
}

__attribute__((visibility("default"))) CUfileError_t cuFileDriverClose_v2() {
  if (c().driver_refs.load() <= 0) return err(CU_FILE_DRIVER_NOT_INITIALIZED);
  c().driver_refs.fetch_sub(1);
  return ok;
}

__attribute__((visibility("default"))) CUfileError_t cuFileHandleRegister(CUfileHandle_t* fh,
                                                                          CUfileDescr_t* d) {
  if (c().driver_refs.load() <= 0) return err(CU_FILE_DRIVER_NOT_INITIALIZED);
  if (fh == nullptr || d == nullptr || d->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD) return err(5022);
  if (::fcntl(d->handle.fd, F_GETFD) < 0) return err(5018);
  struct statfs fs {};
  if (::fstatfs(d->handle.fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC)
    return err(CU_FILE_INTERNAL_ERROR);  // as cuFile does for tmpfs
  *fh = new fake_handle{d->handle.fd};
  c().handles.fetch_add(1);
  return ok;
}

__attribute__((visibility("default"))) void cuFileHandleDeregister(CUfileHandle_t fh) {
  if (fh == nullptr) return;
  delete static_cast<fake_handle*>(fh);
  c().handles.fetch_sub(1);
}

__attribute__((visibility("default"))) CUfileError_t cuFileBufRegister(const void* p, std::size_t n,
                                                                       int) {
  if (p == nullptr || n == 0) return err(5022);
  if (c().refuse_buf.load() != 0) return err(5013);
  c().buffers.fetch_add(1);
  return ok;
}

__attribute__((visibility("default"))) CUfileError_t cuFileBufDeregister(const void* p) {
  if (p == nullptr) return err(5022);
  c().buffers.fetch_sub(1);
  return ok;
}

__attribute__((visibility("default"))) ssize_t cuFileRead(CUfileHandle_t fh, void* buf,
                                                          std::size_t n, off_t off, off_t boff) {
  if (fh == nullptr) return -CU_FILE_HANDLE_NOT_REGISTERED;
  const sync_call counted;
  raise_max(c().max_sync, static_cast<long>(n));
  return do_io(false, static_cast<fake_handle*>(fh)->fd, static_cast<char*>(buf) + boff, n, off);
}

__attribute__((visibility("default"))) ssize_t cuFileWrite(CUfileHandle_t fh, const void* buf,
                                                           std::size_t n, off_t off, off_t boff) {
  if (fh == nullptr) return -CU_FILE_HANDLE_NOT_REGISTERED;
  const sync_call counted;
  raise_max(c().max_sync, static_cast<long>(n));
  return do_io(true, static_cast<fake_handle*>(fh)->fd,
               const_cast<char*>(static_cast<const char*>(buf)) + boff, n, off);
}

__attribute__((visibility("default"))) CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t* h,
                                                                        unsigned nr) {
  if (h == nullptr || nr == 0 || nr > 4096) return err(5022);
  auto* b = new batch;
  b->cap = nr;
  b->entries.reserve(nr);
  b->worker = std::thread([b] { b->run(); });
  *h = b;
  c().batches.fetch_add(1);
  return ok;
}

__attribute__((visibility("default"))) CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t h,
                                                                         unsigned nr,
                                                                         CUfileIOParams_t* p,
                                                                         unsigned) {
  // The knob changes without a notification: look again every millisecond.
  while (c().hang_submit.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto* b = static_cast<batch*>(h);
  if (b == nullptr || p == nullptr || nr == 0 || nr > b->cap) return err(5022);
  for (unsigned i = 0; i < nr; ++i)
    if (p[i].mode != CUFILE_BATCH || p[i].fh == nullptr ||
        (p[i].opcode != CUFILE_READ && p[i].opcode != CUFILE_WRITE))
      return err(5022);
  std::lock_guard g(b->mu);
  for (const auto& e : b->entries)
    if (!b->terminal(e)) return err(5037);  // the previous submit is still running
  b->entries.clear();
  b->next = 0;
  b->cancel = false;
  for (unsigned i = 0; i < nr; ++i) {
    entry e;
    e.p = p[i];
    b->entries.push_back(e);
    raise_max(c().max_entry, static_cast<long>(p[i].u.batch.size));
  }
  c().submits.fetch_add(1);
  c().entries.fetch_add(nr);
  raise_max(c().max_in_flight, c().in_flight.fetch_add(nr) + static_cast<long>(nr));
  b->cv.notify_all();
  return ok;
}

__attribute__((visibility("default"))) CUfileError_t cuFileBatchIOGetStatus(
    CUfileBatchHandle_t h, unsigned min_nr, unsigned* nr, CUfileIOEvents_t* ev,
    struct timespec* timeout) {
  auto* b = static_cast<batch*>(h);
  if (b == nullptr || nr == nullptr || ev == nullptr) return err(5022);
  std::unique_lock lk(b->mu);
  auto ready = [&] {
    unsigned n = 0;
    for (const auto& e : b->entries)
      if (b->terminal(e) && !e.reported) ++n;
    return n;
  };
  if (min_nr > 0) {
    if (timeout == nullptr)
      b->cv.wait(lk, [&] { return ready() >= min_nr; });
    else
      b->cv.wait_for(
          lk, std::chrono::seconds(timeout->tv_sec) + std::chrono::nanoseconds(timeout->tv_nsec),
          [&] { return ready() >= min_nr; });
  }
  unsigned out = 0;
  for (auto& e : b->entries) {
    if (out >= *nr) break;
    if (!b->terminal(e) || e.reported) continue;
    e.reported = true;
    ev[out++] = CUfileIOEvents_t{e.p.cookie, e.status, e.ret};
  }
  *nr = out;
  return ok;
}

__attribute__((visibility("default"))) CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t h) {
  auto* b = static_cast<batch*>(h);
  if (b == nullptr) return err(5022);
  c().cancels.fetch_add(1);
  if (c().ignore_cancel.load() != 0) return err(CU_FILE_INTERNAL_ERROR);
  std::unique_lock lk(b->mu);
  b->cancel = true;
  for (std::size_t i = b->next; i < b->entries.size(); ++i) {
    b->entries[i].status = CUFILE_CANCELED;
    c().in_flight.fetch_sub(1);
  }
  b->next = b->entries.size();
  b->cv.notify_all();
  // What runs now finishes first: afterwards no entry touches its buffer.
  b->cv.wait(lk, [&] {
    for (const auto& e : b->entries)
      if (!b->terminal(e)) return false;
    return true;
  });
  return ok;
}

__attribute__((visibility("default"))) void cuFileBatchIODestroy(CUfileBatchHandle_t h) {
  auto* b = static_cast<batch*>(h);
  if (b == nullptr) return;
  {
    std::lock_guard g(b->mu);
    b->stop = true;
  }
  b->cv.notify_all();
  b->worker.join();
  for (const auto& e : b->entries)
    if (!b->terminal(e)) c().in_flight.fetch_sub(1);
  delete b;
  c().batches.fetch_sub(1);
}

}  // extern "C"
