#pragma once
// A small file system that fills up, for the file backends' fault tests (POSIX, GDS, GDS_MT): a
// tmpfs of a given size, or an ext4 image on a loop device (for cuFile, which refuses tmpfs),
// mounted on a fresh folder and unmounted at scope exit, whatever the test did. Mounting needs
// root (CI runs the tests as root): where it is not permitted, `why()` says so and the test skips.

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "nixl_test/temp_file.hpp"

namespace nixl::test {

class small_fs {
 public:
  enum class type { tmpfs, ext4 };

  /// A file system of `t` and about `bytes` bytes (ext4: the image's size; its free space is
  /// less) on a folder under the temporary folder.
  small_fs(type t, std::size_t bytes) : base_(std::filesystem::temp_directory_path(), "nixl-fs") {
    dir_ = base_ / "mnt";
    std::error_code ec;
    std::filesystem::create_directory(dir_, ec);
    if (ec) {
      why_ = "cannot create " + dir_.string() + ": " + ec.message();
      return;
    }
    if (t == type::tmpfs) {
      const std::string opt = "size=" + std::to_string(bytes);
      if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opt.c_str()) != 0) {
        why_ = std::string("mount -t tmpfs is not permitted here: ") + std::strerror(errno);
        return;
      }
    } else {
      const auto img = base_ / "fs.img";
      const std::string cmd = "truncate -s " + std::to_string(bytes) + " '" + img.string() +
                              "' && mkfs.ext4 -q -F '" + img.string() + "' && mount -o loop '" +
                              img.string() + "' '" + dir_.string() + "'";
      if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) {
        why_ = "mkfs.ext4 and mount -o loop are not available or not permitted here";
        return;
      }
    }
    mounted_ = true;
  }
  ~small_fs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  small_fs(const small_fs&) = delete;
  small_fs& operator=(const small_fs&) = delete;

  bool mounted() const noexcept { return mounted_; }
  const std::string& why() const noexcept { return why_; }
  std::filesystem::path operator/(const std::string& n) const { return dir_ / n; }

 private:
  scratch base_;  // removed after the unmount (members go in reverse order)
  std::filesystem::path dir_;
  std::string why_;
  bool mounted_ = false;
};

}  // namespace nixl::test

#define NIXL_REQUIRE_MOUNT(fs)                                           \
  do {                                                                   \
    if (!(fs).mounted()) NIXL_SKIP("small file system: " << (fs).why()); \
  } while (0)
