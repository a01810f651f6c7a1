// file_io.hpp - the runtime's private file primitives: atomic writes and
// positioned reads, with errors that name the file and the system's reason.
//
// AtomicFileWriter is how every Nova file (checkpoints, token files) is
// written: into a temporary file beside the destination, then fsync, then
// rename over it, so readers see either the old file or the complete new one.
// If the writer is destroyed before commit() the temporary file is removed.
// POSIX only (open/pwrite/fsync/rename); not part of the public headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nova::detail {

class AtomicFileWriter {
 public:
  /// Creates `path`.tmp.<pid>.<n> in the destination's directory; throws
  /// nova::Error (naming `path` and the reason) if it cannot.
  explicit AtomicFileWriter(std::string path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  /// Appends `bytes` bytes; throws nova::Error on failure (e.g. disk full).
  void write(const void* data, std::size_t bytes);
  /// Syncs, closes and renames the temporary file over the destination.
  void commit();

  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

/// A file opened for reading at explicit offsets.
class InputFile {
 public:
  /// Throws nova::Error naming `path` and the reason if it cannot be opened.
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const { return size_; }
  /// Reads exactly `bytes` bytes at `offset`; throws nova::Error otherwise.
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

} // namespace nova::detail
