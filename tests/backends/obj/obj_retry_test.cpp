// The HTTP layer's retries, against a scripted server on 127.0.0.1: 5xx and throttling answers are
// retried with back-off, within the deadline; other answers are not.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/obj.hpp>

#include "obj_test_support.hpp"

using namespace obj_test;
using backend = nixl::obj::backend;

namespace {

/// Answers each request with the next scripted reply (the last one repeats); counts requests.
class scripted_server {
 public:
  struct reply {
    int code;
    std::string body;
  };
  explicit scripted_server(std::vector<reply> replies) : replies_(std::move(replies)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t n = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~scripted_server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  int requests() const { return count_.load(); }
  std::vector<std::string> request_lines() {
    std::lock_guard l(mu_);
    return lines_;
  }

 private:
  void serve() {
    std::vector<int> conns;
    std::vector<std::string> bufs;
    while (!stop_) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (int c : conns) fds.push_back({c, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          conns.push_back(c);
          bufs.emplace_back();
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        const std::size_t k = i - 1;
        char tmp[65536];
        const ssize_t n = ::read(conns[k], tmp, sizeof tmp);
        if (n <= 0) {
          ::close(conns[k]);
          conns[k] = -1;
          continue;
        }
        bufs[k].append(tmp, static_cast<std::size_t>(n));
        handle(conns[k], bufs[k]);
      }
      for (std::size_t k = conns.size(); k-- > 0;)
        if (conns[k] < 0) {
          conns.erase(conns.begin() + static_cast<long>(k));
          bufs.erase(bufs.begin() + static_cast<long>(k));
        }
    }
    for (int c : conns) ::close(c);
  }
  /// Answers every complete request in `buf`.
  void handle(int c, std::string& buf) {
    while (true) {
      const auto end = buf.find("\r\n\r\n");
      if (end == std::string::npos) return;
      std::size_t len = 0;
      std::string head = buf.substr(0, end);
      for (auto& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (auto p = head.find("content-length:"); p != std::string::npos)
        len = std::stoul(head.substr(p + 15));
      if (buf.size() < end + 4 + len) return;
      {
        std::lock_guard l(mu_);
        lines_.push_back(buf.substr(0, buf.find("\r\n")));
      }
      buf.erase(0, end + 4 + len);
      const int i = count_++;
      const reply& r =
          replies_[std::min<std::size_t>(static_cast<std::size_t>(i), replies_.size() - 1)];
      const std::string out = "HTTP/1.1 " + std::to_string(r.code) +
                              " X\r\nContent-Length: " + std::to_string(r.body.size()) +
                              "\r\nETag: \"e\"\r\n\r\n" + r.body;
      [[maybe_unused]] auto w = ::write(c, out.data(), out.size());
    }
  }

  std::vector<reply> replies_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  std::mutex mu_;
  std::vector<std::string> lines_;
  std::thread thread_;
};

const std::string slow_down =
    "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request "
    "rate.</Message></Error>";

nixl::params params(const std::string& ep, const std::string& timeout_ms = "5000") {
  return {{"endpoint_override", "http://" + ep},
          {"bucket", "b"},
          {"access_key", "k"},
          {"secret_key", "s"},
          {"request_timeout_ms", timeout_ms},
          {"retry_backoff_ms", "10"},
          {"retry_backoff_max_ms", "100"},
          {"max_retries", "4"}};
}

struct one_object {
  nixl::agent<backend> ag{"retry"};
  std::vector<std::byte> buf = pattern(1000, 1);
  explicit one_object(const nixl::params& p) {
    ag.create_backend<backend>(p);
    ag.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(buf), buf.size(), 0}, ""}});
    ag.register_memory(nixl::reg_list<nixl::object_t>{{{0, 0, 1}, "key"}});
  }
  auto request(nixl::xfer_op op) {
    return ag.create_request(op, nixl::xfer_list<nixl::dram_t>{{addr(buf), buf.size(), 0}},
                             nixl::xfer_list<nixl::object_t>{{0, buf.size(), 1}}, ag.name());
  }
};

}  // namespace

TEST_CASE("obj retries: throttling and 5xx are retried, then succeed", "[obj][retry]") {
  scripted_server srv({{503, slow_down}, {429, ""}, {500, ""}, {200, ""}});
  one_object o(params(srv.endpoint()));
  auto w = o.request(nixl::xfer_op::write);
  CHECK(run(w, 10s) == nixl::status::success);
  CHECK(srv.requests() == 4);
  const auto st = o.ag.get_backend<backend>().stats();
  CHECK(st.attempts == 4);
  CHECK(st.retries == 3);
  for (const auto& l : srv.request_lines()) CHECK(l == "PUT /b/key HTTP/1.1");
}

TEST_CASE("obj retries: a store that keeps throttling fails with its message", "[obj][retry]") {
  scripted_server srv({{503, slow_down}});
  one_object o(params(srv.endpoint()));
  auto w = o.request(nixl::xfer_op::write);
  CHECK(run(w, 10s) == nixl::status::backend);
  CHECK(srv.requests() == 5);  // the first attempt and max_retries=4 more
  const std::string m(w.engine().error_message(w.backend_state()));
  INFO(m);
  CHECK(m.find("SlowDown") != std::string::npos);
  CHECK(m.find("Please reduce your request rate.") != std::string::npos);
  CHECK(m.find("after 5 attempts") != std::string::npos);
}

TEST_CASE("obj retries: never past the deadline", "[obj][retry]") {
  scripted_server srv({{503, slow_down}});
  auto p = params(srv.endpoint(), "300");
  p["retry_backoff_ms"] = "200";
  p["retry_backoff_max_ms"] = "200";
  p["max_retries"] = "50";
  one_object o(p);
  auto w = o.request(nixl::xfer_op::write);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(run(w, 10s) == nixl::status::backend);
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  CHECK(srv.requests() <= 3);
}

TEST_CASE("obj retries: client errors are not retried", "[obj][retry]") {
  scripted_server srv({{400, "<Error><Code>InvalidArgument</Code><Message>bad</Message></Error>"}});
  one_object o(params(srv.endpoint()));
  auto r = o.request(nixl::xfer_op::read);
  CHECK(run(r, 10s) == nixl::status::invalid_param);
  CHECK(srv.requests() == 1);
}

TEST_CASE("obj retries: a server sending more than the range asked is refused", "[obj][retry]") {
  scripted_server srv({{206, std::string(5000, 'x')}});
  one_object o(params(srv.endpoint()));
  auto r = o.request(nixl::xfer_op::read);
  CHECK(run(r, 10s) == nixl::status::backend);
  const std::string m(r.engine().error_message(r.backend_state()));
  CHECK(m.find("more than the 1000 bytes") != std::string::npos);
}

TEST_CASE("obj: a multipart upload that fails is aborted", "[obj][retry]") {
  scripted_server srv({{200,
                        "<InitiateMultipartUploadResult><UploadId>u-1</UploadId>"
                        "</InitiateMultipartUploadResult>"},
                       {400, "<Error><Code>InvalidPart</Code><Message>no</Message></Error>"},
                       {204, ""}});
  auto p = params(srv.endpoint());
  p["multipart_threshold"] = std::to_string(5u << 20);
  p["part_size"] = std::to_string(5u << 20);
  nixl::agent<backend> ag("abort");
  ag.create_backend<backend>(p);
  auto big = pattern(6u << 20, 2);
  ag.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(big), big.size(), 0}, ""}});
  ag.register_memory(nixl::reg_list<nixl::object_t>{{{0, 0, 1}, "key"}});
  auto w = ag.create_request(nixl::xfer_op::write,
                             nixl::xfer_list<nixl::dram_t>{{addr(big), big.size(), 0}},
                             nixl::xfer_list<nixl::object_t>{{0, big.size(), 1}}, ag.name());
  CHECK(run(w, 10s) == nixl::status::invalid_param);
  const auto end = std::chrono::steady_clock::now() + 5s;
  auto has_delete = [&] {
    for (const auto& l : srv.request_lines())
      if (l == "DELETE /b/key?uploadId=u-1 HTTP/1.1") return true;
    return false;
  };
  while (!has_delete() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
  const auto lines = srv.request_lines();
  REQUIRE(!lines.empty());
  CHECK(lines.front() == "POST /b/key?uploads= HTTP/1.1");
  CHECK(has_delete());
}

TEST_CASE("obj: release right after post, many times; then the request still works",
          "[obj][retry]") {
  scripted_server srv({{200, ""}});
  one_object o(params(srv.endpoint()));
  for (int i = 0; i < 200; ++i) {
    auto w = o.request(nixl::xfer_op::write);
    const auto s = w.post();
    CHECK((s == nixl::status::in_progress || s == nixl::status::success));
    CHECK(w.release() == nixl::status::success);  // cancels wherever the request is
  }
  auto w = o.request(nixl::xfer_op::write);
  CHECK(run(w, 10s) == nixl::status::success);
}
