// captured_stderr.hpp - what a piece of a test writes to stderr (its child
// processes' too: they inherit the descriptor).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace nova_test {

/// Runs `f` with stderr (descriptor 2) going to a scratch file; returns
/// the file's text. Returns "" without running `f` if the file cannot be made.
template <class F> std::string captured_stderr(F&& f) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("nova-stderr-" + std::to_string(::getpid()) + ".txt");
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (saved < 0 || fd < 0) return "";
  ::dup2(fd, 2);
  ::close(fd);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(file);
  return text;
}

} // namespace nova_test
