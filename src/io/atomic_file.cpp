#include "sanpath/io/atomic_file.hpp"

#include "sanpath/core/distributed.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sanpath {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why, int err) {
  throw std::invalid_argument(path + ": file: " + why + (err ? std::string(": ") + std::strerror(err) : ""));
}

/// Closes and removes the temporary file unless it was renamed.
struct TempFile {
  std::string name;
  int fd = -1;
  bool renamed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!renamed && !name.empty()) ::unlink(name.c_str());
  }
};

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  if (world().rank != 0) return;  // under MPI, rank 0 writes what one process writes
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(path, "directory " + dir.string() + " does not exist", 0);
  if (fs::is_directory(target, ec)) fail(path, "is a directory", 0);

  std::vector<char> templ(path.begin(), path.end());
  const std::string suffix = ".tmp-XXXXXX";
  templ.insert(templ.end(), suffix.begin(), suffix.end());
  templ.push_back('\0');
  TempFile tmp;
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) fail(path, "cannot create a temporary file in " + dir.string(), errno);
  tmp.fd = fd;
  tmp.name = templ.data();
  ::fchmod(fd, 0644);  // mkstemp creates 0600

  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ::ssize_t n = ::write(tmp.fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write failed", errno);
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(tmp.fd) != 0) fail(path, "fsync failed", errno);
  const int closed = ::close(tmp.fd);
  tmp.fd = -1;
  if (closed != 0) fail(path, "close failed", errno);
  if (std::rename(tmp.name.c_str(), path.c_str()) != 0) fail(path, "cannot replace the file", errno);
  tmp.renamed = true;
}

}  // namespace sanpath
