// timeline.cpp - nova/timeline.hpp: the last run's timeline, and its Chrome
// trace at exit (NOVA_TIMELINE=<file>).
#include "nova/timeline.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "file_io.hpp"
#include "profile_registry.hpp"

namespace nova {
namespace {

std::mutex mutex;
RunTimeline* last = new RunTimeline; // outlives the exit handler
std::atomic<bool> requested{false};

void write_at_exit() {
  const char* path = std::getenv("NOVA_TIMELINE");
  RunTimeline t = last_timeline();
  if (!path || !*path || t.launches.empty()) return;
  std::string file = t.rank > 0 ? std::string(path) + ".rank" + std::to_string(t.rank) : std::string(path);
  try {
    std::string json = timeline_json(t);
    detail::AtomicFileWriter out(file);
    out.write(json.data(), json.size());
    out.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nova: warning: NOVA_TIMELINE: %s\n", e.what());
  }
}

bool from_env() {
  static const bool on = [] {
    const char* v = std::getenv("NOVA_TIMELINE");
    bool enabled = v && *v;
    if (enabled) std::atexit(write_at_exit);
    return enabled;
  }();
  return on;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

} // namespace

void set_timeline(bool on) { requested = on; }
bool timeline_enabled() { return requested || from_env(); }

RunTimeline last_timeline() {
  std::lock_guard lock(mutex);
  return *last;
}

namespace detail {
double clock_s() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}

void publish_timeline(RunTimeline t) {
  std::lock_guard lock(mutex);
  *last = std::move(t);
}

RunTimeline timeline_of(const ExecutableDesc& desc, int rank, double begin_s) {
  RunTimeline t;
  t.rank = rank;
  t.begin_s = begin_s;
  for (const KernelDesc& k : desc.kernels) t.kernel_names.push_back(k.summary);
  t.launches.reserve(desc.launches.size());
  for (const CollectiveDesc& c : desc.collectives) {
    CollectiveTiming& k = t.collectives.emplace_back();
    k.after_launch = c.after_launch;
    k.before_launch = c.before_launch;
    for (const BufferRef& b : c.buffers) {
      k.bytes += b.bytes;
      k.buffer_bytes.push_back(b.bytes);
    }
  }
  return t;
}
} // namespace detail

std::string timeline_json(const RunTimeline& t) {
  std::string out = "{\"traceEvents\":[";
  char buf[256];
  int pid = t.rank < 0 ? 0 : t.rank;
  bool first = true;
  auto event = [&](const std::string& name, int tid, double b, double e) {
    // The name apart: a side-by-side launch's runs past any fixed buffer.
    std::snprintf(buf, sizeof buf, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", pid, tid,
                  (b - t.begin_s) * 1e6, (e - b) * 1e6);
    out += first ? "{\"name\":" : ",{\"name\":";
    out += quoted(name);
    out += buf;
    first = false;
  };
  for (std::size_t i = 0; i < t.launches.size(); ++i) {
    const LaunchTiming& l = t.launches[i];
    std::string name = l.kernel < t.kernel_names.size() ? t.kernel_names[l.kernel] : "kernel";
    event(std::to_string(i) + " " + name, 0, l.begin_s, l.end_s);
  }
  for (std::size_t c = 0; c < t.collectives.size(); ++c) {
    const CollectiveTiming& k = t.collectives[c];
    std::string what = "bucket " + std::to_string(c) + " (" + std::to_string(k.bytes) + " bytes)";
    event(what + " summed over the ranks", 1, k.start_s, k.wait_end_s);
    event("start " + what, 2, k.start_s, k.start_end_s);
    event("wait for " + what, 2, k.wait_begin_s, k.wait_end_s);
  }
  std::snprintf(buf, sizeof buf,
                "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":%d,\"run_s\":%.9f,\"launches\":%zu,\"buckets\":%zu}}",
                t.rank, t.end_s - t.begin_s, t.launches.size(), t.collectives.size());
  out += buf;
  return out;
}

} // namespace nova
