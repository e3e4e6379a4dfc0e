// NIXL 1.5's strided descriptors as NIXL's users write them: two agents with UCX in one process,
// nixl_stride_dlist_t rows prepared with prepXferDlist, requests made with makeXferReq over
// flat block indices, checked byte for byte against the same blocks listed one by one; then
// strided rows into a file through POSIX, the refusals NIXL gives, and the list's
// serialization. Only <nixl.h> (and NIXL's serdes header). Exit status 0: passed; 77: skipped
// (no UCX backend).

#include <fcntl.h>
#include <unistd.h>

#include <nixl.h>
#include <utils/serdes/serdes.h>

#include "compat_support.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using compat_test::expect;
using compat_test::failures;

nixl_status_t wait_xfer(nixlAgent& a, nixlXferReqH* r) {
  nixl_status_t s = a.postXferReq(r);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s == NIXL_IN_PROG && std::chrono::steady_clock::now() < end) s = a.getXferStatus(r);
  return s;
}

uintptr_t at(std::vector<char>& v, size_t off) {
  return reinterpret_cast<uintptr_t>(v.data()) + off;
}

/// Rows over `v`: 32 sparse blocks of 512 at stride 2048, then 64 dense blocks of 256.
nixl_stride_dlist_t rows(std::vector<char>& v) {
  nixl_stride_dlist_t l(DRAM_SEG);
  l.addDesc(nixlStrideDesc(at(v, 0), 512, 0, 2048, 32));
  l.addDesc(nixlStrideDesc(at(v, 1 << 17), 256, 0, 256, 64));
  return l;
}

/// The same blocks, one descriptor each.
nixl_xfer_dlist_t expanded(const nixl_stride_dlist_t& s) {
  nixl_xfer_dlist_t l(s.getType());
  for (const auto& r : s)
    for (size_t k = 0; k < r.count; ++k)
      l.addDesc(nixlBasicDesc(r.addr + k * r.stride, r.len, r.devId));
  return l;
}

/// prepXferDlist local and remote, makeXferReq over every block, post, wait, release.
nixl_status_t move(nixlAgent& a, const nixl_stride_dlist_t* ls, const nixl_xfer_dlist_t* le,
                   const nixl_stride_dlist_t* rs, const nixl_xfer_dlist_t* re,
                   const std::string& remote, nixl_xfer_op_t op = NIXL_WRITE) {
  nixlDlistH *lh = nullptr, *rh = nullptr;
  nixl_status_t s = ls ? a.prepXferDlist(NIXL_INIT_AGENT, *ls, lh) : a.prepXferDlist(*le, lh);
  if (s != NIXL_SUCCESS) return s;
  s = rs ? a.prepXferDlist(remote, *rs, rh) : a.prepXferDlist(remote, *re, rh);
  if (s != NIXL_SUCCESS) return s;
  size_t n = 0;
  if (ls)
    for (const auto& r : *ls) n += r.count;
  else
    n = static_cast<size_t>(le->descCount());
  std::vector<int> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = static_cast<int>(i);
  nixlXferReqH* req = nullptr;
  s = a.makeXferReq(op, lh, idx, rh, idx, req);
  if (s == NIXL_SUCCESS) {
    s = wait_xfer(a, req);
    a.releaseXferReq(req);
  }
  a.releasedDlistH(lh);
  a.releasedDlistH(rh);
  return s;
}

}  // namespace

int main() {
  nixlAgent a("stride-a", nixlAgentConfig(true)), b("stride-b", nixlAgentConfig(true));
  nixlBackendH *ua = nullptr, *ub = nullptr;
  if (a.createBackend("UCX", {}, ua) != NIXL_SUCCESS ||
      b.createBackend("UCX", {}, ub) != NIXL_SUCCESS) {
    std::printf("SKIPPED: no UCX backend\n");
    return 77;
  }
  const size_t size = 1 << 18;
  std::vector<char> src(size), dst1(size, 0), dst2(size, 0), dst3(size, 0);
  for (size_t i = 0; i < size; ++i) src[i] = static_cast<char>((i * 131 + 7) & 0xff);
  nixl_reg_dlist_t ra(DRAM_SEG), rb(DRAM_SEG);
  ra.addDesc(nixlBlobDesc(at(src, 0), size, 0, ""));
  for (auto* d : {&dst1, &dst2, &dst3}) rb.addDesc(nixlBlobDesc(at(*d, 0), size, 0, ""));
  expect(a.registerMem(ra) == NIXL_SUCCESS, "registerMem(a)");
  expect(b.registerMem(rb) == NIXL_SUCCESS, "registerMem(b)");
  nixl_blob_t md;
  std::string name;
  expect(b.getLocalMD(md) == NIXL_SUCCESS && a.loadRemoteMD(md, name) == NIXL_SUCCESS,
         "loadRemoteMD");

  // Strided on both sides, and the same blocks expanded on both sides: the same bytes.
  const auto ls = rows(src), r1 = rows(dst1), r2 = rows(dst2);
  const auto le = expanded(ls), re2 = expanded(r2);
  expect(move(a, &ls, nullptr, &r1, nullptr, "stride-b") == NIXL_SUCCESS, "strided WRITE");
  expect(move(a, nullptr, &le, nullptr, &re2, "stride-b") == NIXL_SUCCESS, "expanded WRITE");
  expect(dst1 == dst2, "strided and expanded lists moved the same bytes");
  bool blocks_ok = true;
  for (const auto& d : le) {
    const size_t off = d.addr - at(src, 0);
    blocks_ok = blocks_ok && std::memcmp(dst1.data() + off, src.data() + off, d.len) == 0;
  }
  expect(blocks_ok, "every block arrived");
  expect(dst1[512] == 0 && dst1[2047] == 0, "the gaps between blocks stay untouched");

  // A strided list paired with an expanded one in one makeXferReq.
  const auto r3 = expanded(rows(dst3));
  expect(move(a, &ls, nullptr, nullptr, &r3, "stride-b") == NIXL_SUCCESS, "strided -> expanded");
  expect(dst3 == dst1, "strided local with expanded remote");

  // Flat indices: block 40 is the dense run's block 8.
  {
    nixlDlistH *lh = nullptr, *rh = nullptr;
    std::vector<char> back(256, 0);
    nixl_reg_dlist_t rback(DRAM_SEG);
    rback.addDesc(nixlBlobDesc(at(back, 0), back.size(), 0, ""));
    expect(a.registerMem(rback) == NIXL_SUCCESS, "registerMem(back)");
    nixl_xfer_dlist_t lb(DRAM_SEG);
    lb.addDesc(nixlBasicDesc(at(back, 0), 256, 0));
    expect(a.prepXferDlist(lb, lh) == NIXL_SUCCESS, "prep back");
    expect(a.prepXferDlist("stride-b", r1, rh) == NIXL_SUCCESS, "prep strided remote");
    nixlXferReqH* req = nullptr;
    expect(a.makeXferReq(NIXL_READ, lh, {0}, rh, {40}, req) == NIXL_SUCCESS, "READ block 40");
    expect(req != nullptr && wait_xfer(a, req) == NIXL_SUCCESS, "READ block 40 done");
    expect(std::memcmp(back.data(), dst1.data() + (1 << 17) + 8 * 256, 256) == 0,
           "flat index 40 is the second run's block 8");
    if (req) a.releaseXferReq(req);
    // Lengths differ (256 locally, 512 remotely): invalid.
    req = reinterpret_cast<nixlXferReqH*>(&back);
    expect(a.makeXferReq(NIXL_READ, lh, {0}, rh, {0}, req) == NIXL_ERR_INVALID_PARAM,
           "length mismatch is NIXL_ERR_INVALID_PARAM");
    expect(req == nullptr, "length mismatch: the request handle is null");
    a.releasedDlistH(lh);
    a.releasedDlistH(rh);
    a.deregisterMem(rback);
  }

  // Refusals: invalid rows and a span outside every region are NOT_FOUND, the handle null.
  for (const auto& bad :
       {nixlStrideDesc(at(src, 0), 512, 0, 2048, 0), nixlStrideDesc(at(src, 0), 0, 0, 2048, 4),
        nixlStrideDesc(at(src, 0), 512, 0, 256, 4),
        nixlStrideDesc(at(src, 0), 512, 0, 2048, 200)}) {
    nixl_stride_dlist_t l(DRAM_SEG);
    l.addDesc(bad);
    nixlDlistH* h = reinterpret_cast<nixlDlistH*>(&md);
    expect(a.prepXferDlist(l, h) == NIXL_ERR_NOT_FOUND, "invalid row: NIXL_ERR_NOT_FOUND");
    expect(h == nullptr, "invalid row: the handle is null");
    h = reinterpret_cast<nixlDlistH*>(&md);
    expect(a.prepXferDlist("stride-b", l, h) == NIXL_ERR_NOT_FOUND,
           "invalid remote row: NIXL_ERR_NOT_FOUND");
    expect(h == nullptr, "invalid remote row: the handle is null");
  }
  nixlDlistH* h = nullptr;
  expect(a.prepXferDlist("nobody", ls, h) == NIXL_ERR_NOT_FOUND, "unknown agent: NOT_FOUND");

  // POSIX: strided DRAM rows into a file at strided offsets (loopback), read back expanded.
  nixlAgent c("stride-c", nixlAgentConfig(false));
  nixlBackendH* px = nullptr;
  char path[] = "/tmp/nixl-strided-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd >= 0 && c.createBackend("POSIX", {}, px) == NIXL_SUCCESS) {
    ::unlink(path);
    nixl_reg_dlist_t rf(FILE_SEG);
    rf.addDesc(nixlBlobDesc(0, 0, static_cast<uint64_t>(fd), ""));
    std::vector<char> back(32 * 512, 0);
    nixl_reg_dlist_t rd(DRAM_SEG);
    rd.addDesc(nixlBlobDesc(at(src, 0), size, 0, ""));
    rd.addDesc(nixlBlobDesc(at(back, 0), back.size(), 0, ""));
    expect(c.registerMem(rf) == NIXL_SUCCESS, "registerMem(file)");
    expect(c.registerMem(rd) == NIXL_SUCCESS, "registerMem(POSIX dram)");
    nixl_stride_dlist_t fs(FILE_SEG);
    fs.addDesc(nixlStrideDesc(4096, 512, static_cast<uint64_t>(fd), 1024, 32));
    nixl_stride_dlist_t first(DRAM_SEG);  // the 32 sparse blocks of the first row
    first.addDesc(ls[0]);
    expect(move(c, &first, nullptr, &fs, nullptr, "stride-c") == NIXL_SUCCESS,
           "POSIX strided WRITE");
    nixl_xfer_dlist_t lb(DRAM_SEG), fe(FILE_SEG);
    for (size_t k = 0; k < 32; ++k) {
      lb.addDesc(nixlBasicDesc(at(back, k * 512), 512, 0));
      fe.addDesc(nixlBasicDesc(4096 + k * 1024, 512, static_cast<uint64_t>(fd)));
    }
    expect(move(c, nullptr, &lb, nullptr, &fe, "stride-c", NIXL_READ) == NIXL_SUCCESS,
           "POSIX expanded READ");
    bool same = true;
    for (size_t k = 0; k < 32; ++k)
      same = same && std::memcmp(back.data() + k * 512, src.data() + k * 2048, 512) == 0;
    expect(same, "POSIX: the file holds the strided blocks");
    c.deregisterMem(rd);
    c.deregisterMem(rf);
  }
  if (fd >= 0) ::close(fd);

  // Serialization: tag "nixlStrideDList", 40-byte rows, read back equal.
  nixlSerDes ser;
  expect(ls.serialize(&ser) == NIXL_SUCCESS, "serialize");
  const std::string bytes = ser.exportStr();
  expect(bytes.find("nixlStrideDList") != std::string::npos, "tag nixlStrideDList");
  nixlSerDes des;
  expect(des.importStr(bytes) == NIXL_SUCCESS, "importStr");
  nixl_stride_dlist_t round(&des);
  expect(round == ls && round.descCount() == 2 && round[1].count == 64, "round trip");
  nixlSerDes ser2;
  le.serialize(&ser2);
  nixlSerDes des2;
  des2.importStr(ser2.exportStr());
  nixl_stride_dlist_t wrong(&des2);
  expect(wrong.isEmpty(), "a basic list does not read as a strided one");

  a.deregisterMem(ra);
  b.deregisterMem(rb);
  if (failures == 0) std::printf("PASSED\n");
  return failures == 0 ? 0 : 1;
}
