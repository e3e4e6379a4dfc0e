// The C++ library's log lines, sent to Python's `nixl.core` logger (so to the `nixl` logger's
// handler, as NIXL's Python package prints them) with the level of the same name.
//
// A line logged by a thread that holds the GIL is handed to the logger at once. One logged
// without it (a progress thread, a call that released the GIL) goes to a bounded queue that a
// thread of this module empties with the GIL held; that thread holds no lock of the library, so
// logging never waits for the GIL while holding one. At interpreter exit, and in a forked
// child, the lines go back to stderr.

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "module.hpp"

namespace nixl::python {
namespace {

constexpr std::size_t max_queued = 4096;

struct bridge {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::pair<log::level, std::string>> queue;
  std::size_t dropped = 0;
  bool stop = false;
  bool busy = false;  // a batch is being handed over
  std::thread thread;
  PyObject* logger = nullptr;  // logging.getLogger("nixl.core"), kept for the process
};

bridge& the_bridge() {
  static auto* b = new bridge;  // never destroyed: the thread may outlive static destructors
  return *b;
}

int py_level(log::level l) {
  switch (l) {
    case log::level::error:
      return 40;
    case log::level::warn:
      return 30;
    case log::level::info:
      return 20;
    default:
      return 10;  // debug, trace
  }
}

// With the GIL held.
void hand_over(PyObject* logger, log::level l, std::string_view msg) {
  try {
    py::handle lg(logger);
    int lv = py_level(l);
    if (!lg.attr("isEnabledFor")(lv).cast<bool>()) return;
    py::object rec = lg.attr("makeRecord")(
        lg.attr("name"), lv, "c++", 0, py::str(msg.data(), msg.size()), py::tuple(), py::none());
    lg.attr("handle")(rec);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("nixl: forwarding a C++ log line");
  } catch (...) {
  }
}

void to_stderr(log::level l, std::string_view msg) {
  static constexpr const char* tags[] = {"E", "W", "I", "D", "T"};
  std::fprintf(stderr, "[nixl %s] %.*s\n", tags[static_cast<int>(l)], static_cast<int>(msg.size()),
               msg.data());
}

void sink(log::level l, std::string_view msg) noexcept {
  auto& b = the_bridge();
  if (Py_IsInitialized() && PyGILState_Check()) {
    hand_over(b.logger, l, msg);
    return;
  }
  try {
    std::lock_guard g(b.m);
    if (b.stop) {
      to_stderr(l, msg);
      return;
    }
    if (b.queue.size() >= max_queued) {
      ++b.dropped;
      return;
    }
    b.queue.emplace_back(l, std::string(msg));
  } catch (...) {
    return;
  }
  b.cv.notify_one();
}

void run() {
  auto& b = the_bridge();
  std::unique_lock lk(b.m);
  for (;;) {
    b.cv.wait(lk, [&] { return b.stop || !b.queue.empty(); });
    if (b.queue.empty() && b.stop) return;
    auto batch = std::move(b.queue);
    b.queue.clear();
    std::size_t dropped = std::exchange(b.dropped, 0);
    b.busy = true;
    lk.unlock();
    {
      py::gil_scoped_acquire gil;
      for (auto& [l, msg] : batch) hand_over(b.logger, l, msg);
      if (dropped > 0)
        hand_over(b.logger, log::level::warn,
                  fmt::format("{} log lines dropped (logged faster than printed)", dropped));
    }
    lk.lock();
    b.busy = false;
  }
}

// Interpreter exit (atexit): empty the queue, stop the thread, back to stderr.
void stop_bridge() {
  auto& b = the_bridge();
  {
    std::lock_guard g(b.m);
    b.stop = true;
  }
  b.cv.notify_one();
  if (b.thread.joinable()) {
    py::gil_scoped_release nogil;
    b.thread.join();
  }
  log::set_sink(nullptr);
}

}  // namespace

void bind_log_bridge(py::module_& m) {
  auto& b = the_bridge();
  b.logger = py::module_::import("logging").attr("getLogger")("nixl.core").release().ptr();
  b.thread = std::thread(run);
  log::set_sink(sink);
  // A forked child has no forwarding thread: its lines go to stderr.
  pthread_atfork(nullptr, nullptr, [] { log::set_sink(nullptr); });
  py::module_::import("atexit").attr("register")(py::cpp_function(stop_bridge));
  // Hands a C++ log line to the library's logging (tests and programs that log through it).
  m.def(
      "_log",
      [](int lvl, const std::string& msg) {
        auto l = static_cast<log::level>(std::clamp(lvl, 0, 4));
        if (!log::enabled(l)) return;
        py::gil_scoped_release nogil;  // as a library thread would: through the queue
        log::write(l, "{}", msg);
      },
      py::arg("level"), py::arg("message"));
  m.def("_log_flush", [] {
    // Waits (bounded) until the forwarding thread has handed over what was queued.
    auto& b = the_bridge();
    py::gil_scoped_release nogil;
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard g(b.m);
        if (b.queue.empty() && !b.busy) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
}

}  // namespace nixl::python
