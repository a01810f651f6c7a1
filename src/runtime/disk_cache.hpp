// disk_cache.hpp - compiled steps kept on disk, across processes.
//
// An entry is one serialized ExecutableDesc, named by its 128-bit key (the
// structural hash of the traced step + target + compiler version):
// <dir>/<32 hex digits>.nexe. Environment:
//   NOVA_CACHE=off|ro|rw     (default rw)
//   NOVA_CACHE_DIR=<dir>     (default $XDG_CACHE_HOME/nova, else ~/.cache/nova)
//   NOVA_CACHE_MAX_MB=<n>    size bound; least recently used entries go first (default 2048)
//
// Every failure is a warning and a recompile, never a crash or a wrong
// kernel: a truncated, corrupted, foreign (another key inside) or stale
// (another compiler or format version) entry is reported and ignored, and
// removed in rw mode; a directory that cannot be created or written is
// reported once and the step still runs. Entries are published atomically
// (temporary file + rename), so a reader sees a whole entry or none, and
// compiling a key holds an exclusive lock on <key>.lock (flock), so
// processes racing on one key compile it once and the rest load it.
// Private to Nova's libraries (the compile driver uses it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "nova/executable_desc.hpp"

namespace nova::detail {

enum class CacheMode { off, read_only, read_write };

struct DiskCacheConfig {
  CacheMode mode = CacheMode::read_write;
  std::string dir;
  std::uint64_t max_bytes = std::uint64_t{2048} << 20;
};

/// From the environment (read on each call).
DiskCacheConfig disk_cache_config();

using Key = std::array<std::uint64_t, 2>;
std::string key_hex(const Key& key);

/// Prints "nova: warning: <message>" to stderr and counts it (cache_stats()).
void warn(const std::string& message);

class DiskCache {
 public:
  explicit DiskCache(DiskCacheConfig config);

  bool enabled() const { return config_.mode != CacheMode::off && usable_; }
  const DiskCacheConfig& config() const { return config_; }
  std::string entry_path(const Key& key) const;

  /// The entry for `key`, checked (format, checksum, key, compiler version,
  /// `target_hash`); nullopt when missing or unusable (with a warning).
  std::optional<ExecutableDesc> load(const Key& key, std::uint64_t target_hash) const;
  /// Publishes `desc` under desc.key (rw mode), then keeps the directory
  /// under its size bound. Failures warn.
  void store(const ExecutableDesc& desc) const;
  /// Warns about and (rw) removes a bad entry, e.g. one that failed to load.
  void reject(const Key& key, const std::string& why) const;

  /// Holds the cross-process lock of one key while alive (no-op when the
  /// cache is not writable).
  class KeyLock {
   public:
    KeyLock() = default;
    explicit KeyLock(int fd) : fd_(fd) {}
    KeyLock(KeyLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    KeyLock& operator=(KeyLock&&) = delete;
    ~KeyLock();

   private:
    int fd_ = -1;
  };
  KeyLock lock(const Key& key) const;

 private:
  void evict() const;

  DiskCacheConfig config_;
  bool usable_ = false;
};

} // namespace nova::detail
