// disk_cache.cpp - the persistent cache of executable descriptions.
//
// See disk_cache.hpp for the contract. Eviction is least-recently-used by
// modification time: a hit touches its entry. Temporary files left by killed
// writers (*.tmp.*) are removed when older than an hour.
#include "disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "nova/cache.hpp"

namespace fs = std::filesystem;

namespace nova::detail {
namespace {

/// A problem with the cache directory itself is reported once per process.
void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    std::lock_guard lock(mutex);
    if (!said.insert(message).second) return;
  }
  warn(message);
}

std::string default_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/nova";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/nova";
  return "";
}

int lock_timeout_seconds() {
  const char* v = std::getenv("NOVA_CACHE_LOCK_TIMEOUT_S");
  int s = v ? std::atoi(v) : 0;
  return s > 0 ? s : 600;
}

} // namespace

void warn(const std::string& message) {
  std::fprintf(stderr, "nova: warning: %s\n", message.c_str());
  count_warning();
}

std::string key_hex(const Key& key) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(key[0]),
                static_cast<unsigned long long>(key[1]));
  return buf;
}

DiskCacheConfig disk_cache_config() {
  DiskCacheConfig c;
  const char* mode = std::getenv("NOVA_CACHE");
  std::string m = mode ? mode : "rw";
  if (m == "off" || m == "0") c.mode = CacheMode::off;
  else if (m == "ro") c.mode = CacheMode::read_only;
  else if (m == "rw" || m == "1" || m.empty()) c.mode = CacheMode::read_write;
  else {
    warn_once("NOVA_CACHE=" + m + " is not off, ro or rw; using rw");
    c.mode = CacheMode::read_write;
  }
  const char* dir = std::getenv("NOVA_CACHE_DIR");
  c.dir = dir && *dir ? dir : default_dir();
  if (c.dir.empty()) c.mode = CacheMode::off;
  if (const char* mb = std::getenv("NOVA_CACHE_MAX_MB"); mb && std::atof(mb) > 0)
    c.max_bytes = static_cast<std::uint64_t>(std::atof(mb) * 1048576.0);
  return c;
}

DiskCache::DiskCache(DiskCacheConfig config) : config_(std::move(config)) {
  if (config_.mode == CacheMode::off) return;
  std::error_code ec;
  if (config_.mode == CacheMode::read_write) fs::create_directories(config_.dir, ec);
  if (!fs::is_directory(config_.dir, ec)) {
    warn_once("the cache directory " + config_.dir +
              (config_.mode == CacheMode::read_write ? " cannot be created" : " does not exist") +
              "; compiled steps are not cached (NOVA_CACHE_DIR, NOVA_CACHE=off)");
    return;
  }
  usable_ = true;
}

std::string DiskCache::entry_path(const Key& key) const { return config_.dir + "/" + key_hex(key) + ".nexe"; }

void DiskCache::reject(const Key& key, const std::string& why) const {
  std::string path = entry_path(key);
  warn("ignoring cache entry " + path + ": " + why + "; compiling again");
  if (config_.mode == CacheMode::read_write) ::unlink(path.c_str());
}

std::optional<ExecutableDesc> DiskCache::load(const Key& key, std::uint64_t target_hash) const {
  if (!enabled()) return std::nullopt;
  std::string path = entry_path(key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  ExecutableDesc desc;
  try {
    desc = read_executable_file(path);
  } catch (const Error& e) {
    // The message starts with the file's name, which reject() says already.
    std::string why = e.what();
    if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
    reject(key, why);
    return std::nullopt;
  }
  if (desc.key != key) {
    reject(key, "it is a foreign entry (it holds key " + key_hex(desc.key) + ")");
    return std::nullopt;
  }
  if (desc.compiler_version != compiler_version()) {
    reject(key, "it was written by " + desc.compiler_version + ", this is " + compiler_version());
    return std::nullopt;
  }
  if (desc.target.hash() != target_hash) {
    reject(key, "it was compiled for another target (" + desc.target.describe() + ")");
    return std::nullopt;
  }
  if (config_.mode == CacheMode::read_write) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return desc;
}

void DiskCache::store(const ExecutableDesc& desc) const {
  if (!enabled() || config_.mode != CacheMode::read_write) return;
  try {
    write_executable_file(entry_path(desc.key), desc);
  } catch (const Error& e) {
    warn_once("cannot write to the cache directory " + config_.dir + " (" + e.what() +
              "); compiled steps are not cached");
    return;
  }
  count_disk_write();
  evict();
}

void DiskCache::evict() const {
  struct Entry {
    fs::path path;
    std::uint64_t bytes;
    fs::file_time_type time;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(config_.dir, ec)) {
    std::string name = e.path().filename().string();
    std::error_code ec2;
    auto time = e.last_write_time(ec2);
    if (ec2) continue;
    if (name.find(".nexe.tmp.") != std::string::npos) {
      if (now - time > std::chrono::hours(1)) fs::remove(e.path(), ec2);
      continue;
    }
    if (e.path().extension() != ".nexe") continue;
    auto bytes = e.file_size(ec2);
    if (ec2) continue;
    entries.push_back({e.path(), bytes, time});
    total += bytes;
  }
  if (total <= config_.max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= config_.max_bytes) break;
    std::error_code ec2;
    fs::remove(e.path, ec2);
    fs::path lock = e.path;
    fs::remove(lock.replace_extension(".lock"), ec2);
    total -= e.bytes;
  }
}

DiskCache::KeyLock DiskCache::lock(const Key& key) const {
  if (!enabled() || config_.mode != CacheMode::read_write) return KeyLock();
  std::string path = config_.dir + "/" + key_hex(key) + ".lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return KeyLock();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(lock_timeout_seconds());
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      warn("another process has held " + path + " for " + std::to_string(lock_timeout_seconds()) +
           " s; compiling without waiting for it");
      ::close(fd);
      return KeyLock();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return KeyLock(fd);
}

DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

} // namespace nova::detail
