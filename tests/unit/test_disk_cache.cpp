// test_disk_cache.cpp - the on-disk cache under faults: every bad entry or
// unusable directory ends in a warned recompile with the right result, never
// a crash or a wrong kernel. (Across processes: tests/cache/disk_cache.sh.)
#include "scoped_env.hpp"
#include "testing.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using nova::Tensor;

namespace {

using nova_test::Env;

/// A fresh cache directory, read-write, removed afterwards.
struct CacheDir {
  fs::path dir;
  Env env;
  explicit CacheDir(const std::string& name) {
    dir = fs::temp_directory_path() / ("nova-test-cache-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    env.set("NOVA_CACHE_DIR", dir.string());
    env.set("NOVA_CACHE", "rw");
    env.unset("NOVA_CACHE_MAX_MB");
  }
  ~CacheDir() { fs::remove_all(dir); }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (fs::is_directory(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".nexe") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
};

auto probe = [](auto x) { return nova::tanh(x) * 3.0 + 1.0; };
auto probe_other = [](auto x) { return nova::exp(x) - 2.0; };

/// Runs a step as a fresh process would: empty in-process cache.
template <class F> std::pair<Tensor, nova::CacheStats> run_fresh(F f, const Tensor& x) {
  nova::clear_cache();
  Tensor y = nova::jit(f)(x);
  return {y, nova::cache_stats()};
}

const Tensor& input() {
  static Tensor x = Tensor::randn({37, 19}, 20261201);
  return x;
}

Tensor expected() {
  Tensor y = nova::jit(probe, nova::ExecMode::interpreted)(input());
  return y;
}

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::vector<char>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

/// After damaging the one entry: the next fresh run warns, compiles again,
/// computes the right result and leaves a good entry behind.
void check_recompiles(CacheDir& cache, const char* what) {
  INFO(what);
  auto [y, s] = run_fresh(probe, input());
  CHECK(s.compiles == 1);
  CHECK(s.disk_hits == 0);
  CHECK(s.warnings >= 1);
  CHECK(nova_test::rel_error(y, expected()) <= nova_test::kF32Tol);
  auto [y2, s2] = run_fresh(probe, input());
  CHECK(s2.compiles == 0);
  CHECK(s2.disk_hits == 1);
  CHECK(s2.warnings == 0);
  CHECK(y2.to_vector() == y.to_vector());
  CHECK(cache.entries().size() == 1);
}

} // namespace

TEST_CASE("a compiled step is published once and loaded by a fresh cache") {
  CacheDir cache("publish");
  auto [y, s] = run_fresh(probe, input());
  CHECK(s.compiles == 1);
  CHECK(s.disk_writes == 1);
  REQUIRE(cache.entries().size() == 1);
  auto [y2, s2] = run_fresh(probe, input());
  CHECK(s2.compiles == 0);
  CHECK(s2.disk_hits == 1);
  CHECK(s2.traces == 1); // a new process still traces (milliseconds), but never compiles
  CHECK(y2.to_vector() == y.to_vector());
  // The entry is the executable description, named by its key.
  nova::ExecutableDesc desc = nova::read_executable_file(cache.entries()[0].string());
  CHECK(cache.entries()[0].stem().string().size() == 32);
  CHECK(desc.compiler_version == nova::compiler_version());
  CHECK(desc.target.hash() == nova::target_from_env().hash());
}

TEST_CASE("truncated entries are warned about and recompiled") {
  CacheDir cache("truncate");
  run_fresh(probe, input());
  fs::path entry = cache.entries().at(0);
  std::vector<char> good = read_bytes(entry);
  for (std::size_t keep : {std::size_t{0}, std::size_t{7}, std::size_t{20}, good.size() / 2, good.size() - 1}) {
    write_bytes(entry, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(keep)));
    check_recompiles(cache, ("truncated to " + std::to_string(keep) + " bytes").c_str());
  }
}

TEST_CASE("bit flips anywhere in an entry are caught") {
  CacheDir cache("bitflip");
  run_fresh(probe, input());
  fs::path entry = cache.entries().at(0);
  std::vector<char> good = read_bytes(entry);
  std::uint64_t seed = 1201;
  INFO("seed = ", seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<char> bad = good;
    std::size_t bit = rng() % (bad.size() * 8);
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    write_bytes(entry, bad);
    check_recompiles(cache, ("bit " + std::to_string(bit) + " flipped").c_str());
    good = read_bytes(entry);
  }
}

TEST_CASE("entries of another compiler version or format are stale") {
  CacheDir cache("version");
  run_fresh(probe, input());
  fs::path entry = cache.entries().at(0);
  SUBCASE("another compiler version") {
    nova::ExecutableDesc desc = nova::read_executable_file(entry.string());
    desc.compiler_version = "nova 0.1.0 (format 1)";
    nova::write_executable_file(entry.string(), desc);
    check_recompiles(cache, "compiler version bumped");
  }
  SUBCASE("another format version") {
    std::vector<char> bytes = read_bytes(entry);
    bytes[8] = static_cast<char>(bytes[8] + 1); // the u32 after the 8-byte magic
    write_bytes(entry, bytes);
    check_recompiles(cache, "format version bumped");
  }
}

TEST_CASE("a foreign entry under a key is not run") {
  CacheDir cache("foreign");
  run_fresh(probe_other, input());
  fs::path other = cache.entries().at(0);
  std::vector<char> other_bytes = read_bytes(other);
  fs::remove(other);
  run_fresh(probe, input());
  fs::path entry = cache.entries().at(0);
  // Another step's (valid, checksummed) code where this step's should be.
  write_bytes(entry, other_bytes);
  check_recompiles(cache, "foreign entry");
}

TEST_CASE("an entry whose code cannot be loaded is recompiled") {
  CacheDir cache("badcode");
  run_fresh(probe, input());
  fs::path entry = cache.entries().at(0);
  nova::ExecutableDesc desc = nova::read_executable_file(entry.string());
  // A well-formed description whose object code is not a shared object.
  std::fill(desc.object.begin(), desc.object.end(), std::uint8_t{0x5a});
  nova::write_executable_file(entry.string(), desc);
  check_recompiles(cache, "object code replaced");
}

TEST_CASE("a directory that cannot be used is a warning, and the step still runs") {
  Env env;
  env.set("NOVA_CACHE", "rw");
  // /proc/self admits no new files, even for root; a path under a regular
  // file cannot be a directory at all.
  fs::path file = fs::temp_directory_path() / ("nova-test-not-a-dir-" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  for (std::string dir : {std::string("/proc/self/nova-cache"), (file / "cache").string()}) {
    INFO(dir);
    env.set("NOVA_CACHE_DIR", dir);
    auto [y, s] = run_fresh(probe, input());
    CHECK(s.compiles == 1);
    CHECK(s.disk_writes == 0);
    CHECK(nova_test::rel_error(y, expected()) <= nova_test::kF32Tol);
  }
  fs::remove(file);
  if (::geteuid() != 0) { // permissions bind only non-root users
    CacheDir cache("readonly");
    fs::create_directories(cache.dir);
    ::chmod(cache.dir.c_str(), 0555);
    auto [y, s] = run_fresh(probe, input());
    CHECK(s.compiles == 1);
    CHECK(s.warnings >= 1);
    CHECK(nova_test::rel_error(y, expected()) <= nova_test::kF32Tol);
    ::chmod(cache.dir.c_str(), 0755);
  }
}

TEST_CASE("NOVA_CACHE=ro reads and never writes; off does neither") {
  CacheDir cache("modes");
  cache.env.set("NOVA_CACHE", "ro");
  auto [y, s] = run_fresh(probe, input());
  CHECK(s.compiles == 1);
  CHECK(s.disk_writes == 0);
  CHECK(cache.entries().empty());
  cache.env.set("NOVA_CACHE", "rw");
  run_fresh(probe, input());
  REQUIRE(cache.entries().size() == 1);
  cache.env.set("NOVA_CACHE", "ro");
  auto [y2, s2] = run_fresh(probe, input());
  CHECK(s2.disk_hits == 1);
  CHECK(s2.compiles == 0);
  cache.env.set("NOVA_CACHE", "off");
  auto [y3, s3] = run_fresh(probe, input());
  CHECK(s3.disk_hits == 0);
  CHECK(s3.compiles == 1);
  CHECK(y3.to_vector() == y2.to_vector());
}

TEST_CASE("the cache keeps under its size bound, dropping the least recently used") {
  CacheDir cache("bound");
  run_fresh(probe, input());
  auto size = fs::file_size(cache.entries().at(0));
  // Room for one entry and a half: publishing a second evicts the older.
  cache.env.set("NOVA_CACHE_MAX_MB", std::to_string(1.5 * double(size) / 1048576.0));
  fs::path first = cache.entries().at(0);
  // Make the first entry clearly older.
  fs::last_write_time(first, fs::last_write_time(first) - std::chrono::hours(1));
  run_fresh(probe_other, input());
  auto left = cache.entries();
  REQUIRE(left.size() == 1);
  CHECK(left[0] != first);
}
