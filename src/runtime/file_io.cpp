// file_io.cpp - atomic writes and positioned reads on POSIX file descriptors.
//
// Every system call is checked and retried on EINTR; partial reads and writes
// are continued. Errors carry the file's name and strerror(errno).
#include "file_io.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

#include "nova/error.hpp"

namespace nova::detail {
namespace {

std::string reason(int err) { return std::strerror(err); }

/// Distinguishes temporary files of concurrent writers within one process.
std::atomic<std::uint64_t> temp_counter{0};

/// The directory part of `path` ("." if none), for syncing the rename.
std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// Removes `path`'s temporary files (path.tmp.<pid>.<n>) left by writers
/// that died before committing (killed): their process no longer exists.
/// A live writer's file (this process's or another's) is never touched.
void remove_orphaned_temps(const std::string& path) {
  std::string dir = directory_of(path);
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  std::string prefix = base + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = name.substr(prefix.size());
    auto dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos) continue;
    char* end = nullptr;
    long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dot || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue; // alive, or not ours to judge
    ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

} // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  remove_orphaned_temps(path_);
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(temp_counter++);
  do {
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0)
    throw Error("nova: cannot write " + path_ + ": creating the temporary file " + temp_path_ +
                " failed: " + reason(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw Error("nova: cannot write " + path_ + ": the file is already closed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error("nova: cannot write " + path_ + ": writing " + temp_path_ + " failed: " +
                  (n < 0 ? reason(errno) : std::string("no progress")));
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw Error("nova: cannot write " + path_ + ": the file is already closed");
  if (::fsync(fd_) != 0)
    throw Error("nova: cannot write " + path_ + ": fsync of " + temp_path_ + " failed: " +
                reason(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    throw Error("nova: cannot write " + path_ + ": closing " + temp_path_ + " failed: " +
                reason(errno));
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw Error("nova: cannot write " + path_ + ": renaming " + temp_path_ + " over it failed: " +
                reason(errno));
  committed_ = true;
  // Make the rename itself durable; best effort (some file systems refuse).
  int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  do {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) throw Error("nova: cannot open " + path_ + ": " + reason(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throw Error("nova: cannot read " + path_ + ": " + reason(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error("nova: cannot read " + path_ + ": not a regular file");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, void* data, std::size_t bytes) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("nova: cannot read " + path_ + ": " + reason(errno));
    if (n == 0)
      throw Error("nova: cannot read " + path_ + ": the file ended early (was it changed while "
                  "being read?)");
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

} // namespace nova::detail
