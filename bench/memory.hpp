// memory.hpp - resident-set numbers from /proc for benchmarks (Linux).
//
// step memory = peak resident during the measured steps - resident before
// them. Writing "5" to /proc/self/clear_refs resets the peak (VmHWM), so the
// peak of a warmed-up step is measured without the compile that came first.
#pragma once

#include <fstream>
#include <string>

namespace nova_bench {

/// VmRSS or VmHWM of this process, in MiB (-1 if unavailable).
inline double proc_status_mib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == field + ":") {
      double kb = 0;
      in >> kb;
      return kb / 1024.0;
    }
    std::getline(in, key);
  }
  return -1;
}

inline double rss_mib() { return proc_status_mib("VmRSS"); }
inline double peak_mib() { return proc_status_mib("VmHWM"); }
inline void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

} // namespace nova_bench
