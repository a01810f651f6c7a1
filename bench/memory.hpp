// memory.hpp - resident-set numbers from /proc for benchmarks (Linux).
//
// step memory = peak resident during the measured steps - resident before
// them. Writing "5" to /proc/self/clear_refs resets the peak (VmHWM), so the
// peak of a warmed-up step is measured without the compile that came first.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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

/// Resident MiB per mapping kind of this process (/proc/self/smaps): the
/// file's name and permissions ("libLLVM.so.19.1 r-xp"), "[anon] rw-p"...
inline std::map<std::string, double> rss_by_mapping() {
  std::map<std::string, double> rss;
  std::ifstream in("/proc/self/smaps");
  std::string line, current;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string first, perms, offset, dev, inode, path;
    fields >> first;
    if (first == "Rss:") {
      double kb = 0;
      fields >> kb;
      rss[current] += kb / 1024.0;
    } else if (first.find('-') != std::string::npos && first.back() != ':') {
      fields >> perms >> offset >> dev >> inode >> path;
      std::string name = path.empty() ? "[anon]" : path.substr(path.find_last_of('/') + 1);
      current = name + " " + perms;
    }
  }
  return rss;
}

/// Prints the mappings whose resident size grew most from `before` to now.
inline void print_rss_growth(const std::map<std::string, double>& before, int top = 10) {
  std::vector<std::pair<double, std::string>> growth;
  for (const auto& [name, mib] : rss_by_mapping()) {
    auto it = before.find(name);
    double d = mib - (it == before.end() ? 0.0 : it->second);
    if (d > 0.05) growth.emplace_back(d, name);
  }
  std::sort(growth.rbegin(), growth.rend());
  for (int i = 0; i < top && i < static_cast<int>(growth.size()); ++i)
    std::printf("  resident growth since params+batch: %8.1f MiB  %s\n", growth[i].first, growth[i].second.c_str());
}

} // namespace nova_bench
