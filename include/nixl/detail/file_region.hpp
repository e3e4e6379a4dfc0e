#pragma once
/// File regions, as every file backend (POSIX, GDS, GDS_MT) registers them: NIXL's path mode
/// `"<ro|rw|wo>[,direct][,sync][,noatime][,create]:<path>"` in a registration's `meta` (the
/// backend opens the file and closes it at deregistration), else the open descriptor in `dev`;
/// and the `{size, mode, mtime}` answer of `query_memory`.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/detail/log.hpp>
#include <nixl/detail/memory.hpp>
#include <nixl/detail/status.hpp>

namespace nixl::detail {

/// A parsed path mode: the flags for open(2) and the path.
struct path_mode {
  int flags = 0;
  bool create = false;
  std::string path;
};

/// The path mode in `meta`, or nullopt when `meta` is not one (a plain path, or empty).
inline std::optional<path_mode> parse_path_mode(std::string_view meta) {
  const auto colon = meta.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view modes = meta.substr(0, colon);
  path_mode pm;
  int access = -1;
  while (!modes.empty()) {
    const auto comma = modes.find(',');
    const std::string_view tok = modes.substr(0, comma);
    modes = comma == std::string_view::npos ? std::string_view{} : modes.substr(comma + 1);
    if (tok == "ro")
      access = O_RDONLY;
    else if (tok == "rw")
      access = O_RDWR;
    else if (tok == "wo")
      access = O_WRONLY;
    else if (tok == "direct")
      pm.flags |= O_DIRECT;
    else if (tok == "sync")
      pm.flags |= O_SYNC;
    else if (tok == "noatime")
      pm.flags |= O_NOATIME;
    else if (tok == "create")
      pm.create = true;
    else
      return std::nullopt;  // not a mode list: meta is a plain path
  }
  if (access < 0) return std::nullopt;
  pm.flags |= access | O_CLOEXEC | (pm.create ? O_CREAT : 0);
  pm.path = std::string(meta.substr(colon + 1));
  return pm;
}

/// The path a registration's `meta` names (plain or path mode).
inline std::string meta_path(std::string_view meta) {
  if (auto pm = parse_path_mode(meta)) return std::move(pm->path);
  return std::string(meta);
}

/// A registered file: its descriptor, whether the registration opened it (path mode: then it
/// closes it), and its path. Move-only.
struct file_ref {
  int fd = -1;
  bool owns_fd = false;
  std::string path;

  file_ref() = default;
  file_ref(file_ref&& o) noexcept
      : fd(std::exchange(o.fd, -1)),
        owns_fd(std::exchange(o.owns_fd, false)),
        path(std::move(o.path)) {}
  file_ref& operator=(file_ref&& o) noexcept {
    if (this != &o) {
      close();
      fd = std::exchange(o.fd, -1);
      owns_fd = std::exchange(o.owns_fd, false);
      path = std::move(o.path);
    }
    return *this;
  }
  file_ref(const file_ref&) = delete;
  file_ref& operator=(const file_ref&) = delete;
  ~file_ref() { close(); }

  /// Closes the descriptor when the registration opened it, and forgets it either way.
  void close() noexcept {
    if (owns_fd && fd >= 0 && ::close(fd) != 0) {
      try {
        log::error("close(fd {}) of '{}': {}", fd, path, std::strerror(errno));
      } catch (...) {
      }
    }
    fd = -1;
    owns_fd = false;
  }
};

/// Opens the file of FILE registration `d`: the path mode in `meta`, else the descriptor `dev`
/// (which must be open; `meta` is then its path, for messages and queries). `who` names the
/// backend in messages. Throws `nixl::error(invalid_param)` for a path that cannot be opened
/// or a closed descriptor.
inline file_ref open_file(std::string_view who, const reg_desc& d) {
  file_ref f;
  if (auto pm = parse_path_mode(d.meta)) {
    const int fd = ::open(pm->path.c_str(), pm->flags, 0644);
    if (fd < 0) {
      const int e = errno;
      raise(status::invalid_param,
            "{} register_region: cannot open '{}' (meta '{}'): ::open(path, flags): {} (errno "
            "{}); check the path and the mode (ro|rw[,direct][,sync][,noatime][,create])",
            who, pm->path, d.meta, std::strerror(e), e);
    }
    f.fd = fd;
    f.owns_fd = true;
    f.path = std::move(pm->path);
    return f;
  }
  if (d.dev > static_cast<std::uint64_t>(INT_MAX) || ::fcntl(static_cast<int>(d.dev), F_GETFD) < 0)
    raise(status::invalid_param,
          "{} register_region: dev {} is not an open file descriptor; pass an open fd as dev, "
          "or a path as '<ro|rw>[,flags]:<path>' in meta",
          who, d.dev);
  f.fd = static_cast<int>(d.dev);
  f.path = d.meta;
  return f;
}

/// For each entry: `{size, mode, mtime}` of the file named in `meta` (plain path or path mode;
/// the open descriptor `dev` when `meta` is empty), or nullopt when it does not exist. Throws
/// `nixl::error(backend)` when a file exists but cannot be examined.
inline std::vector<std::optional<params>> query_files(std::string_view who,
                                                      std::span<const reg_desc> descs) {
  std::vector<std::optional<params>> out;
  out.reserve(descs.size());
  for (const auto& d : descs) {
    struct stat st {};
    const std::string path = meta_path(d.meta);
    int rc = -1;
    errno = EBADF;
    if (!path.empty())
      rc = ::stat(path.c_str(), &st);
    else if (d.dev <= static_cast<std::uint64_t>(INT_MAX))
      rc = ::fstat(static_cast<int>(d.dev), &st);
    if (rc != 0) {
      const int e = errno;
      if (e == ENOENT || e == ENOTDIR || e == EBADF) {
        out.emplace_back(std::nullopt);
        continue;
      }
      raise(status::backend, "{} query_memory: path '{}', dev {}: {}", who, path, d.dev,
            std::strerror(e));
    }
    out.emplace_back(params{{"size", std::to_string(st.st_size)},
                            {"mode", std::to_string(st.st_mode)},
                            {"mtime", std::to_string(st.st_mtime)}});
  }
  return out;
}

}  // namespace nixl::detail
