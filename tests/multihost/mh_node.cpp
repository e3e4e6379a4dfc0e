// One agent of a multi-host test, written against the C++ API (the Python twin is mh_node.py;
// both speak the line protocol of README.md in this folder).
//
//   nixl_mh_node NAME --size BYTES [--listen] [--port P] [--listen-address A]
//
// Prints "READY <listen port> <buffer address>", then answers one line per command on stdin.
#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>
#include <nixl/metadata/exchange.hpp>
#if defined(NIXL_HAS_LIBFABRIC)
#include <nixl/backends/libfabric.hpp>
#endif

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// NIXL_MH_BACKEND=LIBFABRIC: the node creates the LIBFABRIC backend instead of UCX (its
// interfaces from NIXL_LIBFABRIC_INTERFACES, its provider from FI_PROVIDER).
#if defined(NIXL_HAS_LIBFABRIC)
using agent_t = nixl::agent<nixl::ucx::backend, nixl::libfabric::backend>;
#else
using agent_t = nixl::agent<nixl::ucx::backend>;
#endif
using clock_t_ = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::uint8_t pattern(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>((i * 7 + seed * 13) % 251);
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_t_::now().time_since_epoch())
      .count();
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

struct node {
  std::unique_ptr<agent_t> a;
  std::unique_ptr<nixl::metadata::exchange> x;  // destroyed before the agent (see ~node)
  std::vector<std::uint8_t> buf;
  nixl::notif_map notifs;
  std::thread loop_thread;
  std::atomic<bool> loop_done{false}, stop_loop{false};
  std::atomic<std::size_t> loop_count{0};
  std::string loop_result;
  std::map<std::string, agent_t::xfer_request> reqs;

  std::uintptr_t addr() { return reinterpret_cast<std::uintptr_t>(buf.data()); }

  bool wait_md(const std::string& name, bool present, int ms) {
    const auto end = clock_t_::now() + std::chrono::milliseconds(ms);
    while (clock_t_::now() < end) {
      if (a->check_remote_metadata(name) == present) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }

  nixl::xfer_dlist descs(std::uintptr_t base, std::size_t size, std::size_t n) {
    nixl::xfer_dlist l(nixl::mem_kind::dram);
    for (std::size_t k = 0; k < n; ++k) l.push_back({base + k * size, size, 0});
    return l;
  }

  std::string check(std::uint64_t seed, std::size_t off, std::size_t n) {
    if (off + n > buf.size()) return "ERR range outside the buffer";
    for (std::size_t i = off; i < off + n; ++i)
      if (buf[i] != pattern(seed, i)) return "ERR mismatch at " + std::to_string(i);
    return "OK";
  }

  std::string xfer(const std::string& op, const std::string& peer, std::uintptr_t raddr,
                   std::size_t size, std::size_t n, const std::string& notif) {
    nixl::xfer_options o;
    if (!notif.empty()) o.notif = notif;
    const auto t0 = clock_t_::now();
    auto r = a->create_request(op == "READ" ? nixl::xfer_op::read : nixl::xfer_op::write,
                               descs(addr(), size, n), descs(raddr, size, n), peer, o);
    auto s = r.post();
    while (s == nixl::status::in_progress) {
      if (clock_t_::now() - t0 > 60s) return "ERR timeout";
      s = r.status();
    }
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(clock_t_::now() - t0).count();
    return "OK " + std::string(nixl::to_string(s)) + " " + std::to_string(us);
  }

  // pause: 0 spins on status (LOOP); otherwise the thread sleeps that long between polls and
  // between transfers (PROBE), leaving the CPU to the progress thread and to other hosts.
  void loop(nixl::xfer_op op, std::string peer, std::uintptr_t raddr, std::size_t size,
            std::chrono::microseconds pause = 0us) {
    std::size_t count = 0;
    loop_count = 0;
    nixl::status s = nixl::status::success;
    try {
      auto r = a->create_request(op, descs(addr(), size, 1), descs(raddr, size, 1), peer);
      while (!stop_loop.load()) {
        s = r.post();
        while (s == nixl::status::in_progress) {
          if (pause > 0us) std::this_thread::sleep_for(pause);
          s = r.status();
        }
        if (s != nixl::status::success) break;
        loop_count = ++count;
        if (pause > 0us) std::this_thread::sleep_for(pause);
      }
      loop_result = "OK " + std::string(nixl::to_string(s)) + " " + std::to_string(now_ns()) + " " +
                    std::to_string(count);
    } catch (const std::exception& e) {
      loop_result = "OK EXCEPTION:" + one_line(e.what()) + " " + std::to_string(now_ns()) + " " +
                    std::to_string(count);
    }
    loop_done.store(true);
  }

  // MESH / MESHCHECK: every host of up to mesh_hosts writes to and reads from every other at
  // once. The buffer holds three rows of mesh_hosts slots: row 0, slot j: what this host sends
  // to host j; row 1, slot i: what host i wrote here; row 2, slot j: what this host read back
  // from its slot on host j. The bytes of a slot depend on (source, destination).
  static constexpr std::size_t mesh_hosts = 8;

  struct mesh_peer {
    std::size_t idx = 0;
    std::string name;
    std::uintptr_t raddr = 0;
  };

  static std::uint64_t mesh_seed(std::size_t src, std::size_t dst) {
    return 1000 + src * mesh_hosts + dst;
  }

  std::string mesh_verify(std::size_t off, std::size_t len, std::uint64_t seed) {
    for (std::size_t k = 0; k < len; ++k)
      if (buf[off + k] != pattern(seed, k)) return "mismatch at byte " + std::to_string(k);
    return {};
  }

  // Parses "<self> <slot> <count>" and the peers "<idx>:<name>[:<address>]".
  std::string mesh_args(std::istringstream& in, bool with_addr, std::size_t& self,
                        std::size_t& slot, std::size_t& n, std::vector<mesh_peer>& peers) {
    if (!(in >> self >> slot >> n)) return "ERR usage";
    if (self >= mesh_hosts) return "ERR host index out of range";
    if (n == 0 || slot == 0 || slot % n != 0) return "ERR slot must be a multiple of count";
    if (slot > buf.size() / (3 * mesh_hosts)) return "ERR buffer smaller than 3 rows of slots";
    std::string w;
    while (in >> w) {
      mesh_peer p;
      const auto c1 = w.find(':');
      const auto c2 =
          with_addr ? w.find(':', c1 == std::string::npos ? c1 : c1 + 1) : std::string::npos;
      if (c1 == std::string::npos || (with_addr && c2 == std::string::npos))
        return "ERR bad peer '" + w + "'";
      p.idx = std::stoull(w.substr(0, c1));
      p.name = w.substr(c1 + 1, with_addr ? c2 - c1 - 1 : std::string::npos);
      if (with_addr) p.raddr = static_cast<std::uintptr_t>(std::stoull(w.substr(c2 + 1)));
      if (p.idx >= mesh_hosts || p.idx == self) return "ERR bad peer index in '" + w + "'";
      peers.push_back(std::move(p));
    }
    return peers.empty() ? "ERR no peers" : "";
  }

  // Posts every request, then polls them all until each has ended (bounded); "" when all
  // succeeded.
  static std::string mesh_wait(std::vector<agent_t::xfer_request>& rs,
                               const std::vector<mesh_peer>& peers, const char* what) {
    std::vector<nixl::status> st;
    st.reserve(rs.size());
    for (auto& r : rs) st.push_back(r.post());
    const auto end = clock_t_::now() + 60s;
    for (;;) {
      bool busy = false;
      for (std::size_t k = 0; k < rs.size(); ++k) {
        if (st[k] == nixl::status::in_progress) st[k] = rs[k].status();
        busy = busy || st[k] == nixl::status::in_progress;
      }
      if (!busy) break;
      if (clock_t_::now() > end) return std::string(what) + " timed out";
      std::this_thread::sleep_for(100us);
    }
    for (std::size_t k = 0; k < rs.size(); ++k)
      if (st[k] != nixl::status::success)
        return std::string(what) + " " + peers[k].name + ": " + std::string(nixl::to_string(st[k]));
    return {};
  }

  std::string mesh(std::istringstream& in) {
    std::size_t self = 0, slot = 0, n = 0;
    std::vector<mesh_peer> peers;
    if (auto e = mesh_args(in, true, self, slot, n, peers); !e.empty()) return e;
    const std::size_t d = slot / n, row = mesh_hosts * slot;
    for (const auto& p : peers) {
      const auto seed = mesh_seed(self, p.idx);
      for (std::size_t k = 0; k < slot; ++k) buf[p.idx * slot + k] = pattern(seed, k);
      std::fill_n(buf.begin() + static_cast<std::ptrdiff_t>(2 * row + p.idx * slot), slot, 0);
    }
    const auto t0 = clock_t_::now();
    std::vector<agent_t::xfer_request> rs;
    for (const auto& p : peers) {
      nixl::xfer_options o;
      o.notif = "mesh-" + std::to_string(self) + "-" + std::to_string(p.idx);
      rs.push_back(a->create_request(nixl::xfer_op::write, descs(addr() + p.idx * slot, d, n),
                                     descs(p.raddr + row + self * slot, d, n), p.name, o));
    }
    if (auto e = mesh_wait(rs, peers, "WRITE to"); !e.empty()) return "ERR " + e;
    const auto t1 = clock_t_::now();
    rs.clear();
    for (const auto& p : peers)
      rs.push_back(a->create_request(nixl::xfer_op::read,
                                     descs(addr() + 2 * row + p.idx * slot, d, n),
                                     descs(p.raddr + row + self * slot, d, n), p.name));
    if (auto e = mesh_wait(rs, peers, "READ from"); !e.empty()) return "ERR " + e;
    const auto t2 = clock_t_::now();
    for (const auto& p : peers)
      if (auto e = mesh_verify(2 * row + p.idx * slot, slot, mesh_seed(self, p.idx)); !e.empty())
        return "ERR read back from " + p.name + ": " + e;
    auto us = [](auto dt) {
      return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(dt).count());
    };
    return "OK " + us(t1 - t0) + " " + us(t2 - t1);
  }

  std::string mesh_check(std::istringstream& in) {
    std::size_t self = 0, slot = 0, n = 0;
    int ms = 0;
    if (!(in >> ms)) return "ERR usage";
    std::vector<mesh_peer> peers;
    if (auto e = mesh_args(in, false, self, slot, n, peers); !e.empty()) return e;
    const auto end = clock_t_::now() + std::chrono::milliseconds(ms);
    for (const auto& p : peers) {
      const auto msg = "mesh-" + std::to_string(p.idx) + "-" + std::to_string(self);
      for (;;) {
        a->notifications(notifs);
        auto& got = notifs[p.name];
        if (auto it = std::find(got.begin(), got.end(), msg); it != got.end()) {
          got.erase(it);
          break;
        }
        if (clock_t_::now() > end) return "ERR no notification " + msg + " from " + p.name;
        std::this_thread::sleep_for(1ms);
      }
      const auto off = mesh_hosts * slot + p.idx * slot;
      if (auto e = mesh_verify(off, slot, mesh_seed(p.idx, self)); !e.empty())
        return "ERR data from " + p.name + ": " + e;
    }
    return "OK";
  }

  std::string handle(std::istringstream& in, const std::string& c) {
    if (c == "FILL") {
      std::uint64_t seed;
      in >> seed;
      for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(seed, i);
      return "OK";
    }
    if (c == "ZERO") {
      std::fill(buf.begin(), buf.end(), 0);
      return "OK";
    }
    if (c == "CHECK") {
      std::uint64_t seed;
      std::size_t off, n;
      in >> seed >> off >> n;
      return check(seed, off, n);
    }
    if (c == "FETCH") {
      std::string name, ip;
      int port;
      in >> name >> ip >> port;
      int ms = 10000;
      if (!(in >> ms)) ms = 10000;
      x->fetch_remote_metadata(name, nixl::metadata::target::peer(ip, port)).get();
      return wait_md(name, true, ms) ? "OK" : "ERR not loaded";
    }
    if (c == "FORGET") {  // drops a loaded peer's metadata (invalidate_remote_metadata)
      std::string name;
      in >> name;
      a->invalidate_remote_metadata(name);
      return "OK";
    }
    if (c == "SEND" || c == "INVAL") {
      std::string ip;
      int port;
      in >> ip >> port;
      const auto t = nixl::metadata::target::peer(ip, port);
      (c == "SEND" ? x->send_local_metadata(t) : x->invalidate_local_metadata(t)).get();
      return "OK";
    }
    if (c == "ETCD_SEND") {
      x->send_local_metadata().get();
      return "OK";
    }
    if (c == "ETCD_INVAL") {
      x->invalidate_local_metadata().get();
      return "OK";
    }
    if (c == "ETCD_FETCH") {
      std::string name;
      in >> name;
      x->fetch_remote_metadata(name).get();
      return wait_md(name, true, 10000) ? "OK" : "ERR not loaded";
    }
    if (c == "WAITMD") {
      std::string name, state;
      int ms;
      in >> name >> state >> ms;
      return wait_md(name, state == "present", ms) ? "OK" : "ERR timeout";
    }
    if (c == "HASMD") {
      std::string name;
      in >> name;
      return a->check_remote_metadata(name) ? "OK yes" : "OK no";
    }
    if (c == "XFER") {
      std::string op, peer, notif;
      std::uintptr_t raddr;
      std::size_t size, n;
      in >> op >> peer >> raddr >> size >> n >> notif;
      return xfer(op, peer, raddr, size, n, notif);
    }
    if (c == "LOOP") {
      std::string op, peer;
      std::uintptr_t raddr;
      std::size_t size;
      in >> op >> peer >> raddr >> size;
      if (loop_thread.joinable()) loop_thread.join();
      loop_done = false;
      stop_loop = false;
      loop_thread = std::thread([this, op, peer, raddr, size] {
        loop(op == "READ" ? nixl::xfer_op::read : nixl::xfer_op::write, peer, raddr, size);
      });
      return "OK";
    }
    if (c == "PROBE") {  // LOOP with a pause between polls and between transfers
      std::string op, peer;
      std::uintptr_t raddr;
      std::size_t size;
      long pause_us = 1000;
      in >> op >> peer >> raddr >> size >> pause_us;
      if (pause_us <= 0 || pause_us > 1'000'000) return "ERR pause out of range";
      if (loop_thread.joinable()) loop_thread.join();
      loop_done = false;
      stop_loop = false;
      loop_thread = std::thread([this, op, peer, raddr, size, pause_us] {
        loop(op == "READ" ? nixl::xfer_op::read : nixl::xfer_op::write, peer, raddr, size,
             std::chrono::microseconds(pause_us));
      });
      return "OK";
    }
    if (c == "MESH") return mesh(in);
    if (c == "MESHCHECK") return mesh_check(in);
    if (c == "MKREQ") {  // a request kept for later posts
      std::string id, op, peer;
      std::uintptr_t raddr;
      std::size_t size, n;
      in >> id >> op >> peer >> raddr >> size >> n;
      reqs.erase(id);
      reqs.emplace(id, a->create_request(op == "READ" ? nixl::xfer_op::read : nixl::xfer_op::write,
                                         descs(addr(), size, n), descs(raddr, size, n), peer));
      return "OK";
    }
    if (c == "POSTREQ") {
      std::string id;
      in >> id;
      auto it = reqs.find(id);
      if (it == reqs.end()) return "ERR no request " + id;
      auto s = it->second.post();
      const auto end = clock_t_::now() + 60s;
      while (s == nixl::status::in_progress && clock_t_::now() < end) s = it->second.status();
      return "OK " + std::string(nixl::to_string(s));
    }
    if (c == "RELREQ") {
      std::string id;
      in >> id;
      reqs.erase(id);
      return "OK";
    }
    if (c == "LOOPCOUNT") return "OK " + std::to_string(loop_count.load());
    if (c == "LOOPRESULT") {
      int ms;
      in >> ms;
      const auto end = clock_t_::now() + std::chrono::milliseconds(ms);
      while (!loop_done.load() && clock_t_::now() < end) std::this_thread::sleep_for(1ms);
      if (!loop_done.load()) {
        stop_loop = true;
        loop_thread.join();
        return "ERR still running";
      }
      loop_thread.join();
      return loop_result;
    }
    if (c == "NOTIFCHECK") {
      std::string peer, msg;
      std::uint64_t seed;
      std::size_t off, n;
      int ms;
      in >> peer >> msg >> seed >> off >> n >> ms;
      const auto end = clock_t_::now() + std::chrono::milliseconds(ms);
      for (;;) {
        a->notifications(notifs);
        auto& got = notifs[peer];
        if (auto it = std::find(got.begin(), got.end(), msg); it != got.end()) {
          got.erase(it);
          break;
        }
        if (clock_t_::now() > end) return "ERR no notification";
        std::this_thread::sleep_for(1ms);
      }
      return check(seed, off, n);
    }
    if (c == "WAITREMOTE") {  // DONE (the notification), ERR (an abort notice or the peer
                              // found gone) or PROC (the deadline), and the milliseconds it took
      std::string peer, tag;
      int ms;
      in >> peer >> tag >> ms;
      const auto t0 = clock_t_::now();
      const auto end = t0 + std::chrono::milliseconds(ms);
      nixl::notif_map aborts;
      std::string st = "PROC";
      const auto take = [&](nixl::notif_map& m) {
        auto& got = m[peer];
        auto it = std::find_if(got.begin(), got.end(),
                               [&](const std::string& x) { return x.starts_with(tag); });
        if (it == got.end()) return false;
        got.erase(it);
        return true;
      };
      for (;;) {
        a->notifications(notifs);
        a->aborted_notifications(aborts);
        const auto gone = a->gone_agents();
        if (take(notifs)) {
          st = "DONE";
        } else if (take(aborts) || std::find(gone.begin(), gone.end(), peer) != gone.end()) {
          st = "ERR";
        } else if (clock_t_::now() < end) {
          a->wait_notifications(notifs, aborts, end - clock_t_::now());
          continue;
        }
        break;
      }
      const auto took =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock_t_::now() - t0).count();
      return "OK " + st + " " + std::to_string(took);
    }
    return "ERR unknown command " + c;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s NAME [--size B] [--listen] [--port P] ...\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  std::size_t size = 1 << 20;
  nixl::agent_config cfg;
  cfg.enable_prog_thread = true;
  nixl::metadata::config mc;  // NIXL_LISTEN_ADDRESS, NIXL_METADATA_SECRET, NIXL_ETCD_* apply
  mc.listen_port = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--size")
      size = std::stoull(next());
    else if (k == "--listen")
      mc.listen = true;
    else if (k == "--port")
      mc.listen_port = static_cast<std::uint16_t>(std::stoi(next()));
    else if (k == "--listen-address")
      mc.listen_address = next();
    else if (k == "--secret")
      mc.metadata_secret = next();
    else if (k == "--stall-ms")
      cfg.xfer_stall_timeout = std::chrono::milliseconds(std::stoi(next()));
  }
  node n;
  try {
    n.a = std::make_unique<agent_t>(name, cfg);
    n.x = std::make_unique<nixl::metadata::exchange>(*n.a, mc);
    const char* backend = std::getenv("NIXL_MH_BACKEND");
    if (backend != nullptr && std::string(backend) == "LIBFABRIC") {
#if defined(NIXL_HAS_LIBFABRIC)
      n.a->create_backend<nixl::libfabric::backend>();
#else
      throw std::runtime_error("NIXL_MH_BACKEND=LIBFABRIC: built without the LIBFABRIC backend");
#endif
    } else {
      n.a->create_backend<nixl::ucx::backend>();
    }
    n.buf.assign(size, 0);
    nixl::reg_dlist r(nixl::mem_kind::dram);
    r.push_back({{n.addr(), size, 0}, ""});
    n.a->register_memory(r);
  } catch (const std::exception& e) {
    std::cout << "FAILED " << one_line(e.what()) << std::endl;
    return 1;
  }
  std::cout << "READY " << n.x->port() << " " << n.addr() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string c;
    if (!(in >> c)) continue;
    if (c == "QUIT") break;
    std::string out;
    try {
      out = n.handle(in, c);
    } catch (const std::exception& e) {
      out = "ERR " + one_line(e.what());
    }
    std::cout << out << std::endl;
  }
  if (n.loop_thread.joinable()) {
    n.stop_loop = true;
    n.loop_thread.join();
  }
  n.reqs.clear();
  n.x.reset();
  std::cout << "BYE" << std::endl;
  return 0;
}
