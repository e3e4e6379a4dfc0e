// The transport's bound for one WRITE request of one block: a UCX put and an endpoint flush,
// waited for, one after the other, which is what the UCX backend's post does for such a request
// (docs/ucx.md, "A transfer") without the library around it. ucx_perftest's put_bw completes a
// put locally and has no flush per put, so it cannot separate the flush's round trip.
//
//   put_flush target <listen IPv4> <port> <bytes> [spin us]
//   put_flush initiator <target IPv4> <port> <iters for 1 MiB and below> <size>...
//
// The target registers <bytes>, sends its worker address, the rkey and the buffer's address over
// a TCP connection, and progresses its worker until the initiator closes that connection
// (as the backend's progress thread does with its default progress_spin_us: after 50 us, or
// `spin us`, without work it sleeps on the worker's wake-up). The
// initiator puts each size from the start of the buffer, `iters` times after iters/10 + 1
// warm-up turns (larger sizes: iters MiB in all, at least 20 turns; nixl-bench's and
// multihost.sh's perftest counts), and prints a line per size:
//   putflush <bytes> <turns> <average us> <GB/s (10^9 B/s)>
// Data endpoints in UCX's error mode none, as the backend's. Run by bench/nixl-bench/multihost.sh.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "put_flush: %s\n", what);
  std::exit(2);
}

void check(ucs_status_t s, const char* what) {
  if (s == UCS_OK) return;
  std::fprintf(stderr, "put_flush: %s: %s\n", what, ucs_status_string(s));
  std::exit(2);
}

struct ucx {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucx() {
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    ucp_config_t* c = nullptr;
    check(ucp_config_read(nullptr, nullptr, &c), "ucp_config_read");
    check(ucp_init(&p, c, &ctx), "ucp_init");
    ucp_config_release(c);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    check(ucp_worker_create(ctx, &wp, &worker), "ucp_worker_create");
  }
  ucp_mem_h map(std::vector<char>& buf) {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = buf.data();
    mp.length = buf.size();
    ucp_mem_h h = nullptr;
    check(ucp_mem_map(ctx, &mp, &h), "ucp_mem_map");
    return h;
  }
  void wait(ucs_status_ptr_t r, const char* what) {
    if (UCS_PTR_IS_ERR(r)) check(UCS_PTR_STATUS(r), what);
    if (r == nullptr) return;
    ucs_status_t s;
    while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(r);
    check(s, what);
  }
};

void send_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) die("send");
    c += k;
    n -= static_cast<std::size_t>(k);
  }
}

void recv_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0) die("recv");
    c += k;
    n -= static_cast<std::size_t>(k);
  }
}

void send_blob(int fd, const void* p, std::uint32_t n) {
  send_all(fd, &n, sizeof n);
  send_all(fd, p, n);
}

std::string recv_blob(int fd) {
  std::uint32_t n = 0;
  recv_all(fd, &n, sizeof n);
  if (n > (1u << 20)) die("a blob longer than 1 MiB");
  std::string s(n, '\0');
  recv_all(fd, s.data(), n);
  return s;
}

sockaddr_in ipv4(const char* ip, const char* port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(port)));
  if (::inet_pton(AF_INET, ip, &a.sin_addr) != 1) die("not an IPv4 address");
  return a;
}

int target(const char* ip, const char* port, std::size_t bytes, std::chrono::microseconds spin) {
  ucx u;
  std::vector<char> buf(bytes, 1);
  ucp_mem_h mh = u.map(buf);
  void* rkey = nullptr;
  std::size_t rkey_len = 0;
  check(ucp_rkey_pack(u.ctx, mh, &rkey, &rkey_len), "ucp_rkey_pack");
  ucp_address_t* addr = nullptr;
  std::size_t addr_len = 0;
  check(ucp_worker_get_address(u.worker, &addr, &addr_len), "ucp_worker_get_address");
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = ipv4(ip, port);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0)
    die("bind/listen");
  std::printf("put_flush target: waiting for the initiator\n");
  std::fflush(stdout);
  const int fd = ::accept(ls, nullptr, nullptr);
  if (fd < 0) die("accept");
  send_blob(fd, addr, static_cast<std::uint32_t>(addr_len));
  send_blob(fd, rkey, static_cast<std::uint32_t>(rkey_len));
  const auto base = reinterpret_cast<std::uint64_t>(buf.data());
  send_all(fd, &base, sizeof base);
  // The initiator's close ends the run; the worker is progressed until then (UCX's tcp puts
  // need the target's worker), as the backend's progress thread does: progress while there is
  // work, and after `spin` without any, sleep on the worker's wake-up (and the connection).
  int efd = -1;
  check(ucp_worker_get_efd(u.worker, &efd), "ucp_worker_get_efd");
  using clock = std::chrono::steady_clock;
  auto idle_since = clock::now();
  for (;;) {
    if (ucp_worker_progress(u.worker) != 0) {
      idle_since = clock::now();
      continue;
    }
    if (clock::now() - idle_since < spin) continue;
    const ucs_status_t s = ucp_worker_arm(u.worker);
    if (s == UCS_ERR_BUSY) continue;
    check(s, "ucp_worker_arm");
    pollfd fds[2] = {{efd, POLLIN, 0}, {fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) die("poll");
    char c;
    if ((fds[1].revents & (POLLIN | POLLHUP)) != 0 && ::recv(fd, &c, 1, 0) <= 0) break;
    idle_since = clock::now();
  }
  ::close(fd);
  ::close(ls);
  ucp_worker_release_address(u.worker, addr);
  ucp_rkey_buffer_release(rkey);
  return 0;
}

int initiator(const char* ip, const char* port, long iters, int nsizes, char** sizes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = ipv4(ip, port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  ucx u;
  const std::string addr = recv_blob(fd);
  const std::string packed = recv_blob(fd);
  std::uint64_t base = 0;
  recv_all(fd, &base, sizeof base);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(addr.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h h = nullptr;
  check(ucp_ep_create(u.worker, &ep, &h), "ucp_ep_create");
  ucp_rkey_h rkey = nullptr;
  check(ucp_ep_rkey_unpack(h, packed.data(), &rkey), "ucp_ep_rkey_unpack");
  std::size_t most = 0;
  for (int i = 0; i < nsizes; ++i)
    most = std::max<std::size_t>(most, std::strtoull(sizes[i], nullptr, 10));
  std::vector<char> buf(most, 2);
  ucp_mem_h mh = u.map(buf);
  ucp_request_param_t put{};
  put.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
  put.memh = mh;
  ucp_request_param_t flush{};
  const auto turn = [&](std::size_t b) {
    u.wait(ucp_put_nbx(h, buf.data(), b, base, rkey, &put), "ucp_put_nbx");
    u.wait(ucp_ep_flush_nbx(h, &flush), "ucp_ep_flush_nbx");
  };
  for (int i = 0; i < nsizes; ++i) {
    const std::size_t b = std::strtoull(sizes[i], nullptr, 10);
    if (b == 0) die("a size of 0");
    long n = b <= (1u << 20) ? iters : static_cast<long>(iters * (1u << 20) / b);
    if (n < 20) n = 20;
    for (long k = 0; k < n / 10 + 1; ++k) turn(b);
    const auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < n; ++k) turn(b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("putflush %zu %ld %.3f %.4f\n", b, n, s / n * 1e6,
                static_cast<double>(b) * n / s / 1e9);
    std::fflush(stdout);
  }
  ucp_rkey_destroy(rkey);
  u.wait(ucp_ep_close_nbx(h, &flush), "ucp_ep_close_nbx");
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if ((argc == 5 || argc == 6) && std::strcmp(argv[1], "target") == 0)
    return target(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10),
                  std::chrono::microseconds(argc == 6 ? std::atol(argv[5]) : 50));
  if (argc >= 6 && std::strcmp(argv[1], "initiator") == 0)
    return initiator(argv[2], argv[3], std::atol(argv[4]), argc - 5, argv + 5);
  std::fprintf(stderr,
               "usage: put_flush target <listen IPv4> <port> <bytes> [spin us]\n"
               "       put_flush initiator <target IPv4> <port> <iters> <size>...\n");
  return 2;
}
