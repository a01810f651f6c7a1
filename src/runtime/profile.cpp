// profile.cpp - NOVA_PROFILE: per-kernel time, by class, printed at exit.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "nova/profile.hpp"
#include "profile_registry.hpp"

namespace nova {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<detail::ExecutableProfile>> profiles;
};

Registry& registry() {
  static Registry* r = new Registry; // outlives the exit handler
  return *r;
}

/// The class the compiler gave the kernel: its summary up to ": "
/// ("matmul", "attention", "row kernels", "elementwise", "optimizer", ...);
/// a GPU step's kernels launched together ("3 kernels side by side: ...")
/// are one class, whatever their number.
std::string kernel_class(const std::string& summary) {
  std::size_t colon = summary.find(": ");
  std::string head = colon == std::string::npos ? summary : summary.substr(0, colon);
  return head.ends_with(" kernels side by side") ? "side by side" : head;
}

void print_at_exit() {
  // NOVA_PROFILE=<n> with n > 1 lists the top n kernels.
  int top = std::atoi(std::getenv("NOVA_PROFILE"));
  std::string report = profile_report(top > 1 ? top : 15);
  if (!report.empty()) std::fputs(report.c_str(), stderr);
}

} // namespace

bool profiling_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("NOVA_PROFILE");
    bool enabled = v && *v && std::strcmp(v, "0") != 0;
    if (enabled) std::atexit(print_at_exit);
    return enabled;
  }();
  return on;
}

std::string profile_report(int top_kernels) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::string out;
  char line[512];
  for (std::size_t e = 0; e < r.profiles.size(); ++e) {
    const detail::ExecutableProfile& p = *r.profiles[e];
    std::uint64_t runs = p.runs.load();
    if (runs == 0) continue;
    double total = 0;
    std::map<std::string, double> by_class;
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < p.desc.kernels.size(); ++k) {
      double s = double(p.kernel_ns[k].load()) * 1e-9;
      total += s;
      by_class[kernel_class(p.desc.kernels[k].summary)] += s;
      order.push_back(k);
    }
    double per_run = double(p.run_ns.load()) * 1e-9 / double(runs);
    std::snprintf(line, sizeof line,
                  "nova profile: executable %zu (%zu launches of %zu kernels): %llu runs, %.3f ms per run, "
                  "%.1f%% of it in kernels\n",
                  e, p.desc.launches.size(), p.desc.kernels.size(), (unsigned long long)runs, per_run * 1e3,
                  per_run > 0 ? 100.0 * total / double(runs) / per_run : 0.0);
    out += line;
    std::vector<std::pair<std::string, double>> classes(by_class.begin(), by_class.end());
    std::sort(classes.begin(), classes.end(), [](auto& a, auto& b) { return a.second > b.second; });
    for (const auto& [name, s] : classes) {
      std::snprintf(line, sizeof line, "  %-24s %6.1f%%  %9.3f ms per run\n", name.c_str(),
                    total > 0 ? 100.0 * s / total : 0.0, s * 1e3 / double(runs));
      out += line;
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return p.kernel_ns[a].load() > p.kernel_ns[b].load(); });
    // Symbols as wide as the longest listed (a GPU step's side-by-side
    // kernels: nova_k123_side45).
    std::size_t width = 6;
    for (std::size_t i = 0; i < order.size() && int(i) < top_kernels; ++i)
      width = std::max(width, p.desc.kernels[order[i]].symbol.size());
    std::snprintf(line, sizeof line, "  %-*s   time%%  launches/run  ms/launch   GFLOP/s    GB/s  what\n", int(width),
                  "kernel");
    out += line;
    for (std::size_t i = 0; i < order.size() && int(i) < top_kernels; ++i) {
      std::size_t k = order[i];
      const KernelDesc& kd = p.desc.kernels[k];
      double s = double(p.kernel_ns[k].load()) * 1e-9;
      double n = double(p.kernel_launches[k].load());
      if (n == 0) continue;
      double per = s / n;
      std::snprintf(line, sizeof line, "  %-*s %6.1f%% %12.1f %10.3f %9.1f %7.1f  %s\n", int(width), kd.symbol.c_str(),
                    total > 0 ? 100.0 * s / total : 0.0, n / double(runs), per * 1e3,
                    per > 0 ? double(kd.flops) / per * 1e-9 : 0.0, per > 0 ? double(kd.bytes) / per * 1e-9 : 0.0,
                    kd.summary.c_str());
      out += line;
    }
  }
  return out;
}

void reset_profile() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& p : r.profiles) {
    for (auto& v : p->kernel_ns) v = 0;
    for (auto& v : p->kernel_launches) v = 0;
    p->runs = 0;
    p->run_ns = 0;
  }
}

namespace detail {
ExecutableProfile* register_profile(const ExecutableDesc& desc) {
  ExecutableDesc copy = desc;
  copy.object.clear();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.profiles.push_back(std::make_unique<ExecutableProfile>(copy));
  return r.profiles.back().get();
}
} // namespace detail

} // namespace nova
