#include <nixl/detail/host_identity.hpp>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "nixl_test/catch.hpp"

using nixl::detail::host_identity;

namespace {

std::string encoded(const host_identity& id) {
  nixl::detail::writer w;
  id.encode(w);
  return w.take();
}

host_identity decoded(std::string_view blob) {
  nixl::detail::reader r(blob, "test identity");
  host_identity id = host_identity::decode(r);
  r.finish();
  return id;
}

// Runs `child` in a forked process and returns what it wrote (at most 4 KiB).
template <class F>
std::string in_child(F child) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const std::string out = child();
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) got.append(buf, n);
  ::close(fds[0]);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  return got;
}

}  // namespace

TEST_CASE("fnv1a matches the published FNV-1a 64-bit values") {
  CHECK(nixl::detail::fnv1a("") == 0xcbf29ce484222325ull);
  CHECK(nixl::detail::fnv1a("a") == 0xaf63dc4c8601ec8cull);
  CHECK(nixl::detail::fnv1a("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("this process's identity is read from the kernel") {
  const host_identity& me = host_identity::self();
  CHECK(&me == &host_identity::self());  // read once
  CHECK(me.boot_id_from_kernel());
  CHECK(me.boot_id.size() == 36);  // xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
  CHECK(me.pid == static_cast<std::uint32_t>(::getpid()));
  CHECK(me.start_time != 0);
  CHECK(me.start_time == nixl::detail::process_start_time(me.pid));
  CHECK(me.pid_ns != 0);
  CHECK(me.ipc_ns != 0);
  CHECK(me.net_ns != 0);
  CHECK(me.token != 0);
  CHECK(nixl::detail::same_host(me, me));
  CHECK(nixl::detail::same_process(me, me));
  // a second reading is another draw of the token: another process image to a peer
  const host_identity again = host_identity::read_now();
  CHECK(again.token != me.token);
  CHECK(again.boot_id == me.boot_id);
  CHECK(nixl::detail::process_start_time(0x7ffffffe) == 0);  // no such process
}

TEST_CASE("same host needs the boot id and the pid, ipc and net namespaces") {
  const host_identity me = host_identity::self();
  host_identity other = me;
  other.pid = me.pid + 1;
  other.token = me.token + 1;
  CHECK(nixl::detail::same_host(me, other));
  CHECK_FALSE(nixl::detail::same_process(me, other));

  for (auto field : {&host_identity::pid_ns, &host_identity::ipc_ns, &host_identity::net_ns}) {
    host_identity sandbox = other;
    sandbox.*field += 1;  // a container or sandbox host on the same kernel
    CHECK_FALSE(nixl::detail::same_host(me, sandbox));
    CHECK_FALSE(nixl::detail::same_host(sandbox, me));
  }
  host_identity rebooted = other;
  rebooted.boot_id.back() = rebooted.boot_id.back() == '0' ? '1' : '0';
  CHECK_FALSE(nixl::detail::same_host(me, rebooted));

  // exec() keeps the pid and start time; the token tells the new image apart
  host_identity execed = me;
  execed.token = me.token + 1;
  CHECK_FALSE(nixl::detail::same_process(me, execed));

  // the host-name fallback does not prove that two processes share a host
  host_identity a = me, b = other;
  a.boot_id = b.boot_id = "hostname:0123456789abcdef";
  CHECK_FALSE(a.boot_id_from_kernel());
  CHECK_FALSE(nixl::detail::same_host(a, b));
  CHECK(nixl::detail::same_host(a, a));
}

TEST_CASE("a forked child reads its own identity") {
  const host_identity& parent = host_identity::self();
  const std::string blob = in_child([] { return encoded(host_identity::self()); });
  const host_identity child = decoded(blob);
  CHECK(child.pid != parent.pid);
  CHECK(child.token != parent.token);
  CHECK(child.start_time != 0);
  CHECK(nixl::detail::same_host(parent, child));
  CHECK_FALSE(nixl::detail::same_process(parent, child));
  CHECK(&host_identity::self() == &parent);  // the parent's stays
}

TEST_CASE("start time is field 22 even when the command name has spaces and parentheses") {
  const std::string got = in_child([] {
    ::prctl(PR_SET_NAME, "a) b (c) 4 5", 0, 0, 0);
    const auto pid = static_cast<std::uint32_t>(::getpid());
    return std::to_string(nixl::detail::process_start_time(pid)) + " " +
           nixl::detail::read_small_file(fmt::format("/proc/{}/stat", pid).c_str());
  });
  const auto space = got.find(' ');
  REQUIRE(space != std::string::npos);
  const std::string start = got.substr(0, space);
  const std::string stat = got.substr(space + 1);
  REQUIRE(stat.find("(a) b (c) 4 5)") != std::string::npos);
  // field 22 counted by hand from the end of the name: 20 fields after ") "
  std::string_view rest = std::string_view(stat).substr(stat.rfind(')') + 2);
  for (int i = 3; i < 22; ++i) rest.remove_prefix(rest.find(' ') + 1);
  CHECK(start == std::string(rest.substr(0, rest.find(' '))));
  CHECK(start != "0");
}

TEST_CASE("an identity round-trips and bad input is refused with mismatch") {
  const host_identity& me = host_identity::self();
  const std::string blob = encoded(me);
  CHECK(decoded(blob) == me);

  for (std::size_t n = 0; n < blob.size(); ++n) {
    try {
      (void)decoded(std::string_view(blob).substr(0, n));
      FAIL("truncated identity of " << n << " bytes was accepted");
    } catch (const nixl::error& e) {
      REQUIRE(e.status_code() == nixl::status::mismatch);
    }
  }
  host_identity big = me;
  big.boot_id.assign(host_identity::max_boot_id + 1, 'x');
  CHECK_THROWS_AS(decoded(encoded(big)), nixl::error);
  big = me;
  big.hostname.assign(host_identity::max_hostname + 1, 'h');
  CHECK_THROWS_AS(decoded(encoded(big)), nixl::error);
  host_identity empty = me;
  empty.boot_id.clear();
  CHECK_THROWS_AS(decoded(encoded(empty)), nixl::error);
}
