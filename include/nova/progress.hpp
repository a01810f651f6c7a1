// progress.hpp - a progress line for long runs: bar, step, loss, throughput
// and ETA. On a terminal it redraws one line; otherwise (logs, CI) it prints
// a plain line every `every` steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace nova {

class Progress {
 public:
  Progress(std::int64_t total, std::int64_t first = 0, std::int64_t every = 10)
      : total_(total), first_(first), every_(every), tty_(::isatty(STDOUT_FILENO) != 0),
        start_(std::chrono::steady_clock::now()) {}

  /// Reports step `step` (1-based) with its loss and how many items (tokens)
  /// it processed.
  void update(std::int64_t step, double loss, double items) {
    items_ += items;
    double secs = elapsed();
    double rate = secs > 0 ? items_ / secs : 0.0;
    double steps_done = double(step - first_);
    double eta = steps_done > 0 ? secs / steps_done * double(total_ - step) : 0.0;
    if (!tty_ && step % every_ != 0 && step != total_) return;
    const int width = 24;
    int filled = total_ > 0 ? static_cast<int>(width * step / total_) : width;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::printf("%s[%s] step %lld/%lld  loss %.4f  %.0f tok/s  ETA %s%s", tty_ ? "\r" : "", bar.c_str(),
                (long long)step, (long long)total_, loss, rate, clock(eta).c_str(), tty_ ? "   " : "\n");
    if (tty_ && step == total_) std::printf("\n");
    std::fflush(stdout);
  }

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double items_per_second() const { return elapsed() > 0 ? items_ / elapsed() : 0.0; }

  /// "1m05s"
  static std::string clock(double seconds) {
    auto s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s / 60) % 60);
    else std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    return buf;
  }

 private:
  std::int64_t total_, first_, every_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  double items_ = 0;
};

} // namespace nova
