// Does an answer sent on an endpoint created to the requester's worker address arrive?
// docs/ucx.md, "Copy requests": the requester (which already has an endpoint to the peer) sends
// its worker address in an active message; the peer creates an endpoint to that address inside
// the message's callback and, 200 ms later and from another thread, sends the answer on it.
// Exit 0 when the answer arrived within 3 s. Run by reply_endpoint.sh, once per UCX_TLS.

#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr unsigned request_id = 1, answer_id = 2;

ucp_context_h ctx = nullptr;
ucp_worker_h worker = nullptr;
ucp_ep_h reply_ep = nullptr;
bool requested = false, answered = false;

void init() {
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
  ucp_config_t* c = nullptr;
  if (ucp_config_read(nullptr, nullptr, &c) != UCS_OK || ucp_init(&p, c, &ctx) != UCS_OK)
    std::exit(2);
  ucp_config_release(c);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK) std::exit(2);
}

std::string address() {
  ucp_address_t* a = nullptr;
  std::size_t n = 0;
  if (ucp_worker_get_address(worker, &a, &n) != UCS_OK) std::exit(2);
  std::string s(reinterpret_cast<const char*>(a), n);
  ucp_worker_release_address(worker, a);
  return s;
}

ucp_ep_h connect(const void* addr) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = static_cast<const ucp_address_t*>(addr);
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h h = nullptr;
  if (ucp_ep_create(worker, &ep, &h) != UCS_OK) std::exit(2);
  return h;
}

void handle(unsigned id, ucp_am_recv_callback_t cb) {
  ucp_am_handler_param_t h{};
  h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
  h.id = id;
  h.cb = cb;
  if (ucp_worker_set_am_recv_handler(worker, &h) != UCS_OK) std::exit(2);
}

void wait_for(ucs_status_ptr_t r) {
  if (UCS_PTR_IS_ERR(r)) std::exit(3);
  if (r == nullptr) return;
  while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
  ucp_request_free(r);
}

ucs_status_t on_request(void*, const void*, std::size_t, void* data, std::size_t,
                        const ucp_am_recv_param_t*) {
  reply_ep = connect(data);  // inside the callback, as a served copy would
  requested = true;
  return UCS_OK;
}

ucs_status_t on_answer(void*, const void*, std::size_t, void*, std::size_t,
                       const ucp_am_recv_param_t*) {
  answered = true;
  return UCS_OK;
}

}  // namespace

int main() {
  int to_peer[2], to_requester[2];
  if (::pipe(to_peer) != 0 || ::pipe(to_requester) != 0) return 2;
  const pid_t pid = ::fork();
  init();
  if (pid == 0) {  // the peer
    handle(request_id, on_request);
    const std::string a = address();
    const std::size_t n = a.size();
    if (::write(to_requester[1], &n, sizeof n) != sizeof n ||
        ::write(to_requester[1], a.data(), n) != static_cast<ssize_t>(n))
      return 2;
    while (!requested) ucp_worker_progress(worker);
    const auto t0 = clock_type::now();
    while (clock_type::now() - t0 < std::chrono::milliseconds(200)) ucp_worker_progress(worker);
    std::thread answer([] {
      static const std::string msg = "done";
      ucp_request_param_t p{};
      wait_for(ucp_am_send_nbx(reply_ep, answer_id, nullptr, 0, msg.data(), msg.size(), &p));
      ucp_request_param_t cp{};
      wait_for(ucp_ep_close_nbx(reply_ep, &cp));
    });
    answer.join();
    char c = 0;
    return ::read(to_peer[0], &c, 1) == 1 ? 0 : 2;
  }
  handle(answer_id, on_answer);
  std::size_t n = 0;
  if (::read(to_requester[0], &n, sizeof n) != sizeof n || n > (1u << 20)) return 2;
  std::string peer(n, '\0');
  if (::read(to_requester[0], peer.data(), n) != static_cast<ssize_t>(n)) return 2;
  ucp_ep_h ep = connect(peer.data());
  const std::string mine = address();
  ucp_request_param_t p{};
  wait_for(ucp_am_send_nbx(ep, request_id, nullptr, 0, mine.data(), mine.size(), &p));
  const auto t0 = clock_type::now();
  while (!answered && clock_type::now() - t0 < std::chrono::seconds(3)) ucp_worker_progress(worker);
  std::printf(
      "answer %s after %lld ms\n", answered ? "arrived" : "missing",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count()));
  std::fflush(stdout);
  if (answered) {
    (void)::write(to_peer[1], "x", 1);
    int st = 0;
    ::waitpid(pid, &st, 0);
  } else {
    ::kill(pid, SIGKILL);  // its send never completes
    ::waitpid(pid, nullptr, 0);
  }
  return answered ? 0 : 1;
}
