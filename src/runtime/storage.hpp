// storage.hpp - a Tensor's buffer, and the newer copy of it a GPU step may
// keep on the device.
//
// A GPU step that updates an input in place (parameters, optimizer state)
// leaves the result in its device buffer instead of copying it back after
// every call: the storage is marked as held by that executable, and the
// next call of the same executable with the same tensor skips the upload.
// The host's first access (Tensor::raw_data, so data, span, at, ...) copies
// the bytes back and ends the hold (the access may write, so the next call
// uploads again). An executable that goes copies back what it holds first.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "nova/tensor.hpp"

namespace nova::detail {

/// Who may hold a storage's newer bytes: a GPU executable.
class DeviceHolder {
 public:
  /// Copies `bytes` bytes at `device` (its buffer) into `host`.
  virtual void copy_to_host(std::uint64_t device, void* host, std::size_t bytes) const = 0;

 protected:
  ~DeviceHolder() = default;
};

struct Storage {
  Storage(std::byte* bytes, std::size_t size) : bytes(bytes), size(size) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* const bytes;
  const std::size_t size;

  /// The host's bytes, current: a holder's newer ones copied back first.
  std::byte* host() {
    if (held_.load(std::memory_order_acquire)) copy_back(nullptr);
    return bytes;
  }
  /// Whether `holder` holds the newer bytes, in its buffer at `device`.
  bool held_by(const DeviceHolder* holder, std::uint64_t device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_.load(std::memory_order_relaxed) && holder_ == holder && device_ == device;
  }
  /// From now the newer bytes are `holder`'s, at `device` (all `size` of them).
  void hold(const DeviceHolder* holder, std::uint64_t device) {
    std::lock_guard<std::mutex> lock(mutex_);
    holder_ = holder;
    device_ = device;
    held_.store(true, std::memory_order_release);
  }
  /// Copies the newer bytes back if `holder` holds them (it is going), or
  /// whoever holds them when `holder` is null.
  void copy_back(const DeviceHolder* holder);

 private:
  std::mutex mutex_;
  std::atomic<bool> held_{false};
  const DeviceHolder* holder_ = nullptr;
  std::uint64_t device_ = 0;
};

/// The runtime's access to a tensor's storage.
struct TensorAccess {
  static const std::shared_ptr<Storage>& storage(const Tensor& t) { return t.storage_; }
  /// Whether `t` is all of its storage (so a device copy of `t` is one of it).
  static bool whole(const Tensor& t) {
    return t.storage_ && t.offset_ == 0 && t.is_contiguous() &&
           static_cast<std::size_t>(t.numel()) * size_of(t.dtype_) == t.storage_->size;
  }
  /// The first element's address, without copying anything back: for
  /// telling buffers apart, not for reading them.
  static const std::byte* address(const Tensor& t) {
    return t.storage_->bytes + t.offset_ * static_cast<std::int64_t>(size_of(t.dtype_));
  }
};

} // namespace nova::detail
