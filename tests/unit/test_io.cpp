// test_io.cpp - safetensors checkpoints and token files, without any compiler.
//
// The safetensors tests check the bytes Nova writes against a hand-built file
// (so the format, not only the round trip, is verified) and feed the reader
// one hand-built malformed file per rule it enforces: each must throw
// nova::FormatError naming the file and the problem. Files live in a fresh
// temporary directory per test.
#include <doctest/doctest.h>

#include <nova/data/tokens.hpp>
#include <nova/io/safetensors.hpp>

#include "test_seed.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nova::DType;
using nova::Tensor;

namespace {

/// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("nova-test-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  /// Names of the entries in the directory.
  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.insert(e.path().filename().string());
    return names;
  }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The 8-byte little-endian encoding of n.
std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out;
}

/// A safetensors file from its parts: length prefix, header text, data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

/// The suite's seed (test_seed.hpp) mixed with the calling line: a fixed,
/// different stream per test.
std::uint64_t seed_here(std::uint64_t salt = __builtin_LINE()) { return nova_test::test_seed() * 1000003u + salt; }

/// The message of the FormatError that loading `bytes` throws ("" if none,
/// "<other exception>" for any other exception).
std::string load_error(const TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  try {
    nova::load_safetensors(path);
  } catch (const nova::FormatError& e) {
    return e.what();
  } catch (...) {
    return "<other exception>";
  }
  return "";
}

/// Checks that loading `bytes` throws a FormatError naming the file and
/// containing `problem`.
void check_rejected(const std::string& bytes, const std::string& problem) {
  TempDir dir;
  std::string message = load_error(dir, bytes);
  INFO("message: " << message);
  CHECK(message.find(dir.file("bad.safetensors")) != std::string::npos);
  CHECK(message.find(problem) != std::string::npos);
}

/// A valid entry for a tensor.
std::string entry(const std::string& dtype, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end) {
  return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":[)" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

void check_same(const Tensor& a, const Tensor& b) {
  CHECK(a.spec() == b.spec());
  CHECK(a.to_vector() == b.to_vector());
}

} // namespace

// ---------------------------------------------------------------- safetensors

TEST_CASE("safetensors: f32/f64/i32/i64, rank 0 and zero-size dims round trip in order") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w", Tensor::randn({3, 5}, seed, DType::f32)},
      {"v", Tensor::randn({2, 2, 2}, seed + 1, DType::f64)},
      {"ids", Tensor::uniform({7}, seed + 2, -1000, 1000, DType::i32)},
      {"big", Tensor::from<std::int64_t>({2}, {std::int64_t{1} << 62, -(std::int64_t{1} << 40)})},
      {"scalar", Tensor::full({}, 2.5, DType::f32)},
      {"empty", Tensor::zeros({2, 0, 3}, DType::f64)},
      {"also empty", Tensor::zeros({0}, DType::i32)},
  };
  const std::string path = dir.file("all.safetensors");
  nova::save_safetensors(path, tensors);
  nova::SafetensorsFile file = nova::load_safetensors(path);
  REQUIRE(file.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO("tensor " << tensors[i].first);
    CHECK(file.tensors[i].first == tensors[i].first);
    check_same(file.tensors[i].second, tensors[i].second);
  }
  CHECK(file.metadata.empty());
  CHECK(dir.listing() == std::set<std::string>{"all.safetensors"});
}

TEST_CASE("safetensors: metadata round trips; an empty file holds no tensors") {
  TempDir dir;
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "1200"}, {"note", "ünïcode"}};
  nova::save_safetensors(dir.file("m.safetensors"), {{"x", Tensor::full({2}, 1.0)}}, metadata);
  CHECK(nova::load_safetensors(dir.file("m.safetensors")).metadata == metadata);

  nova::save_safetensors(dir.file("none.safetensors"), {});
  CHECK(read_bytes(dir.file("none.safetensors")) == le64(8) + "{}      ");
  nova::SafetensorsFile none = nova::load_safetensors(dir.file("none.safetensors"));
  CHECK(none.tensors.empty());
  CHECK(none.metadata.empty());
}

TEST_CASE("safetensors: the bytes written match a hand-built file") {
  TempDir dir;
  const std::string path = dir.file("tiny.safetensors");
  nova::save_safetensors(path,
                         {{"b", Tensor::from<std::int32_t>({2}, {1, -2})}, {"a", Tensor::full({}, 1.5)}},
                         {{"format", "nova"}});
  // 140 bytes of JSON padded with 4 spaces to 144 = 0x90, so data is 8-aligned.
  const std::string header = R"({"__metadata__":{"format":"nova"},)"
                             R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[],"data_offsets":[8,12]}})"
                             "    ";
  const std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + header +
                               std::string("\x01\0\0\0" "\xFE\xFF\xFF\xFF" "\0\0\xC0\x3F", 12);
  CHECK(read_bytes(path) == expected);
}

TEST_CASE("safetensors: reads a hand-built file with padding and unsorted keys") {
  TempDir dir;
  const std::string path = dir.file("hand.safetensors");
  // Tensors listed in the header out of data order; data: i64 7, then f32 [-1, 0.5].
  const std::string header = R"({"z":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]}}  )";
  write_bytes(path, safetensors_bytes(header, std::string("\x07\0\0\0\0\0\0\0", 8) +
                                                  std::string("\0\0\x80\xBF" "\0\0\0\x3F", 8)));
  nova::SafetensorsFile file = nova::load_safetensors(path);
  REQUIRE(file.tensors.size() == 2);
  CHECK(file.tensors[0].first == "z");
  check_same(file.tensors[0].second, Tensor::from<std::int64_t>({}, {7}));
  CHECK(file.tensors[1].first == "a");
  check_same(file.tensors[1].second, Tensor::from<float>({1, 2}, {-1.0f, 0.5f}));
}

TEST_CASE("safetensors: a non-contiguous tensor is written row-major") {
  TempDir dir;
  Tensor t = Tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<std::int64_t> perm{1, 0};
  Tensor view = t.permute(perm);
  nova::save_safetensors(dir.file("p.safetensors"), {{"t", view}});
  Tensor back = nova::load_safetensors(dir.file("p.safetensors")).tensors.at(0).second;
  CHECK(back.shape() == nova::Shape{3, 2});
  CHECK(back.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("safetensors rejects: a file shorter than 8 bytes") {
  check_rejected("", "0 bytes");
  check_rejected("abc", "3 bytes");
}

TEST_CASE("safetensors rejects: a header length larger than the file") {
  check_rejected(le64(100) + "{}", "header length 100 exceeds the 2 bytes");
  check_rejected(le64(~std::uint64_t{0}) + "{}", "header length");
}

TEST_CASE("safetensors rejects: a header length over 100 MB") {
  check_rejected(le64(100'000'001) + "{}", "exceeds the limit of 100000000 bytes");
}

TEST_CASE("safetensors rejects: a header that is not JSON") {
  check_rejected(safetensors_bytes("{not json", ""), "not valid JSON");
  check_rejected(safetensors_bytes("{}junk", ""), "not valid JSON");
  check_rejected(safetensors_bytes(std::string("{\"\xFF\":1}"), ""), "not valid JSON");
}

TEST_CASE("safetensors rejects: a header that is JSON but not an object") {
  check_rejected(safetensors_bytes("[1, 2]", ""), "not an object");
  check_rejected(safetensors_bytes(R"({"a":[1]})", ""), "tensor 'a': the entry is not a JSON object");
  check_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[]}})", "1234"), "no \"data_offsets\"");
  check_rejected(safetensors_bytes(R"({"__metadata__":{"k":1}})", ""), "is not a string");
  check_rejected(safetensors_bytes(R"({"__metadata__":[]})", ""), "\"__metadata__\" is not a JSON object");
}

TEST_CASE("safetensors rejects: an unknown dtype") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("X99", "[1]", 0, 4) + "}", "1234"),
                 "unsupported dtype 'X99'");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("BF16", "[2]", 0, 4) + "}", "1234"),
                 "unsupported dtype 'BF16'");
  check_rejected(safetensors_bytes(R"({"a":{"dtype":4,"shape":[],"data_offsets":[0,4]}})", "1234"),
                 "\"dtype\" is not a string");
}

TEST_CASE("safetensors rejects: negative or non-integer shape entries") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[-1]", 0, 4) + "}", "1234"),
                 "shape entry -1 is not a non-negative integer");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[1.5]", 0, 4) + "}", "1234"),
                 "shape entry 1.5");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", R"(["1"])", 0, 4) + "}", "1234"),
                 "shape entry \"1\"");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "3", 0, 4) + "}", "1234"),
                 "\"shape\" is not an array");
}

TEST_CASE("safetensors rejects: element count x dtype size that overflows") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[4294967296,4294967296]", 0, 4) + "}", "1234"),
                 "overflows");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F64", "[1152921504606846976]", 0, 4) + "}", "1234"),
                 "overflows");
  // A zero extent does not excuse the others: strides would still overflow.
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[0,4294967296,4294967296]", 0, 0) + "}", ""),
                 "overflows");
}

TEST_CASE("safetensors rejects: a byte count that differs from end - begin") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[2]", 0, 4) + "}", "1234"),
                 "F32[2] needs 8 bytes but data_offsets [0,4] hold 4");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("I64", "[]", 0, 4) + "}", "1234"),
                 "needs 8 bytes");
}

TEST_CASE("safetensors rejects: offsets outside the data section or malformed") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[2]", 0, 8) + "}", "1234"),
                 "reach past the data section (4 bytes)");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[1]", 4, 0) + "}", "1234"),
                 "begin after they end");
  check_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "1234"),
                 "is not a pair of non-negative integers");
  check_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "1234"),
                 "is not a pair of non-negative integers");
}

TEST_CASE("safetensors rejects: overlapping tensors") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[2]", 0, 8) + R"(,"b":)" +
                                       entry("F32", "[2]", 4, 12) + "}",
                                   std::string(12, 'x')),
                 "'a' [0, 8) and 'b' [4, 12) overlap");
}

TEST_CASE("safetensors rejects: holes in the data section") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[1]", 0, 4) + R"(,"b":)" +
                                       entry("F32", "[1]", 8, 12) + "}",
                                   std::string(12, 'x')),
                 "bytes [4, 8) of the data section belong to no tensor");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[1]", 4, 8) + "}", std::string(8, 'x')),
                 "bytes [0, 4)");
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[1]", 0, 4) + "}", std::string(8, 'x')),
                 "bytes [4, 8) of the data section belong to no tensor");
  check_rejected(safetensors_bytes("{}", "x"), "bytes [0, 1)");
}

TEST_CASE("safetensors rejects: duplicate names") {
  check_rejected(safetensors_bytes(R"({"a":)" + entry("F32", "[1]", 0, 4) + R"(,"a":)" +
                                       entry("F32", "[1]", 4, 8) + "}",
                                   std::string(8, 'x')),
                 "the header names 'a' twice");
  check_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                   "1234"),
                 "the header's entry for 'a' has the key 'dtype' twice");
}

TEST_CASE("safetensors: a truncated copy of a valid file is rejected at every length") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  const std::string good = dir.file("good.safetensors");
  nova::save_safetensors(good, {{"a", Tensor::randn({3}, seed)}, {"b", Tensor::randn({2, 2}, seed + 1, DType::f64)}},
                         {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    std::string message = load_error(dir, bytes.substr(0, n));
    CHECK(!message.empty());
    CHECK(message != "<other exception>");
  }
  CHECK(load_error(dir, bytes).empty());
}

TEST_CASE("safetensors: random corruptions either load or throw FormatError, never crash") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  const std::string good = dir.file("good.safetensors");
  nova::save_safetensors(good,
                         {{"a", Tensor::randn({3}, seed)}, {"b", Tensor::zeros({2, 0})},
                          {"c", Tensor::from<std::int64_t>({2}, {1, 2})}},
                         {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  std::mt19937_64 gen(seed);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bad = bytes;
    const int edits = 1 + static_cast<int>(gen() % 3);
    for (int e = 0; e < edits; ++e) {
      std::size_t at = gen() % bad.size();
      // Mostly header bytes, where the structure is; digits make plausible numbers.
      if (gen() % 2) bad[at] = static_cast<char>('0' + gen() % 10);
      else bad[at] = static_cast<char>(gen());
    }
    INFO("trial " << trial);
    CHECK(load_error(dir, bad) != "<other exception>");
  }
}

TEST_CASE("safetensors: bad save arguments throw before touching the file system") {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  Tensor t = Tensor::zeros({2});
  CHECK_THROWS_AS(nova::save_safetensors(path, {{"a", t}, {"a", t}}), nova::Error);
  CHECK_THROWS_AS(nova::save_safetensors(path, {{"__metadata__", t}}), nova::Error);
  CHECK_THROWS_AS(nova::save_safetensors(path, {{"a", Tensor()}}), nova::Error);
  CHECK_THROWS_AS(nova::save_safetensors(path, {{std::string("\xFF"), t}}), nova::Error);
  CHECK(dir.listing().empty());
  CHECK_THROWS_AS(nova::load_safetensors(path), nova::Error); // missing file
}

TEST_CASE("safetensors: a failed save leaves the existing file byte-identical") {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> old_tensors = {{"old", Tensor::full({3}, 7.0)}};
  std::vector<std::pair<std::string, Tensor>> new_tensors = {{"new", Tensor::full({4}, 1.0)}};

  SUBCASE("into a directory that does not exist") {
    CHECK_THROWS_AS(nova::save_safetensors(dir.file("missing/x.safetensors"), new_tensors), nova::Error);
    CHECK(dir.listing().empty());
  }
  SUBCASE("the temporary file cannot be created (its name is too long)") {
    // 252 characters is a valid file name; with ".tmp.<pid>.<n>" it exceeds
    // NAME_MAX (255), so Nova cannot save there: write the old file by hand.
    const std::string path = dir.file(std::string(240, 'c') + ".safetensors");
    const std::string before = safetensors_bytes("{}      ", "");
    write_bytes(path, before);
    CHECK_THROWS_AS(nova::save_safetensors(path, new_tensors), nova::Error);
    CHECK(read_bytes(path) == before);
    CHECK(dir.listing().size() == 1);
  }
  SUBCASE("invalid arguments") {
    const std::string path = dir.file("x.safetensors");
    nova::save_safetensors(path, old_tensors);
    const std::string before = read_bytes(path);
    CHECK_THROWS_AS(nova::save_safetensors(path, {{"a", Tensor()}}), nova::Error);
    CHECK(read_bytes(path) == before);
  }
  SUBCASE("the final rename fails: the temporary file is removed") {
    fs::create_directories(dir.path() / "target.safetensors" / "occupied");
    CHECK_THROWS_AS(nova::save_safetensors(dir.file("target.safetensors"), new_tensors), nova::Error);
    CHECK(dir.listing() == std::set<std::string>{"target.safetensors"});
    CHECK(fs::is_directory(dir.path() / "target.safetensors" / "occupied"));
  }
  SUBCASE("a successful save replaces the file and leaves nothing else") {
    const std::string path = dir.file("x.safetensors");
    nova::save_safetensors(path, old_tensors);
    nova::save_safetensors(path, new_tensors);
    CHECK(nova::load_safetensors(path).tensors.at(0).first == "new");
    CHECK(dir.listing() == std::set<std::string>{"x.safetensors"});
  }
}

TEST_CASE("Params: save and load round trip, in place") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  nova::Params params;
  params.add("w1", nova::init::kaiming_uniform({4, 8}, seed));
  params.add("b1", nova::init::zeros({8}, DType::f64));
  params.add("step", Tensor::from<std::int64_t>({}, {42}));
  nova::save(params, dir.file("ckpt.safetensors"), {{"epoch", "3"}});

  nova::Params restored;
  restored.add("w1", nova::init::zeros({4, 8}));
  restored.add("b1", Tensor::full({8}, 5.0, DType::f64));
  restored.add("step", Tensor::from<std::int64_t>({}, {0}));
  Tensor w1_handle = restored["w1"]; // shares storage: loading must update it
  void* w1_storage = w1_handle.raw_data();
  nova::load(restored, dir.file("ckpt.safetensors"));
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << params.names()[i]);
    check_same(restored.tensors()[i], params.tensors()[i]);
  }
  CHECK(restored["w1"].raw_data() == w1_storage);
  CHECK(w1_handle.to_vector() == params["w1"].to_vector());
  CHECK(nova::load_safetensors(dir.file("ckpt.safetensors")).metadata.at("epoch") == "3");

  // Tensors in the file that the model lacks are ignored.
  nova::Params subset;
  subset.add("step", Tensor::from<std::int64_t>({}, {0}));
  nova::load(subset, dir.file("ckpt.safetensors"));
  CHECK(subset["step"].at({}) == 42.0);
}

TEST_CASE("Params: a checkpoint that does not fit is rejected and changes nothing") {
  TempDir dir;
  nova::Params params;
  params.add("a", Tensor::full({2}, 1.0));
  params.add("w", Tensor::full({3, 4}, 2.0));
  nova::save(params, dir.file("ckpt.safetensors"));

  nova::Params other;
  other.add("a", Tensor::full({2}, 9.0));
  other.add("w", Tensor::full({4, 3}, 9.0));
  CHECK_THROWS_WITH_AS(nova::load(other, dir.file("ckpt.safetensors")),
                       doctest::Contains("the parameter 'w' is f32[4, 3] but the file holds f32[3, 4]"),
                       nova::FormatError);
  CHECK(other["a"].to_vector() == std::vector<double>{9, 9}); // untouched

  nova::Params wrong_dtype;
  wrong_dtype.add("a", Tensor::full({2}, 9.0, DType::f64));
  CHECK_THROWS_WITH_AS(nova::load(wrong_dtype, dir.file("ckpt.safetensors")),
                       doctest::Contains("'a' is f64[2] but the file holds f32[2]"), nova::FormatError);

  nova::Params missing;
  missing.add("bias", Tensor::zeros({2}));
  CHECK_THROWS_WITH_AS(nova::load(missing, dir.file("ckpt.safetensors")),
                       doctest::Contains("no tensor for the parameter 'bias'"), nova::FormatError);
}

// ---------------------------------------------------------------- tokens

TEST_CASE("tokens: byte tokenization round trips any bytes") {
  std::string text = "Hello, Nova!\n";
  text += std::string("\0\x7F\x80\xFF", 4);
  auto tokens = nova::tokenize_bytes(text);
  REQUIRE(tokens.size() == text.size());
  CHECK(tokens[0] == 'H');
  CHECK(tokens[text.size() - 1] == 255);
  CHECK(nova::detokenize_bytes(tokens) == text);
  std::vector<std::int32_t> ids = {72, 105, 0, 255};
  CHECK(nova::detokenize_bytes(ids) == std::string("Hi\0\xFF", 4));
  std::vector<std::int32_t> bad = {72, 256};
  CHECK_THROWS_AS(nova::detokenize_bytes(bad), nova::Error);
}

TEST_CASE("tokens: write and read back in both formats, little-endian") {
  TempDir dir;
  std::vector<std::uint16_t> tokens = {0, 1, 255, 7, 42};
  nova::write_tokens(dir.file("t8.bin"), tokens, nova::TokenFormat::u8);
  CHECK(read_bytes(dir.file("t8.bin")) == std::string("\0\x01\xFF\x07\x2A", 5));
  nova::TokenFile t8 = nova::TokenFile::open(dir.file("t8.bin"), nova::TokenFormat::u8);
  CHECK(t8.size() == 5);
  CHECK(t8[2] == 255);
  CHECK(t8.max_token() == 255);

  tokens.push_back(65535);
  tokens.push_back(258);
  nova::write_tokens(dir.file("t16.bin"), tokens, nova::TokenFormat::u16);
  CHECK(read_bytes(dir.file("t16.bin")) ==
        std::string("\0\0\x01\0\xFF\0\x07\0\x2A\0\xFF\xFF\x02\x01", 14));
  nova::TokenFile t16 = nova::TokenFile::open(dir.file("t16.bin"), nova::TokenFormat::u16);
  REQUIRE(t16.size() == 7);
  for (std::int64_t i = 0; i < t16.size(); ++i) CHECK(t16[i] == tokens[static_cast<std::size_t>(i)]);
  CHECK(t16.max_token() == 65535);
  CHECK_THROWS_AS(t16[7], nova::Error);
  CHECK_THROWS_AS(t16[-1], nova::Error);

  auto bytes = nova::tokenize_bytes("abc");
  nova::write_tokens(dir.file("abc.bin"), std::span<const std::uint8_t>(bytes), nova::TokenFormat::u16);
  CHECK(read_bytes(dir.file("abc.bin")) == std::string("a\0b\0c\0", 6));
  CHECK(dir.listing() == std::set<std::string>{"t8.bin", "t16.bin", "abc.bin"});
}

TEST_CASE("tokens: malformed files and tokens are rejected") {
  TempDir dir;
  write_bytes(dir.file("odd.bin"), "abc");
  const std::string odd_message = dir.file("odd.bin") + " has 3 bytes, not a multiple of 2";
  CHECK_THROWS_WITH_AS(nova::TokenFile::open(dir.file("odd.bin"), nova::TokenFormat::u16),
                       doctest::Contains(odd_message.c_str()), nova::FormatError);
  CHECK(nova::TokenFile::open(dir.file("odd.bin"), nova::TokenFormat::u8).size() == 3);

  write_bytes(dir.file("empty.bin"), "");
  CHECK_THROWS_AS(nova::TokenFile::open(dir.file("empty.bin"), nova::TokenFormat::u8), nova::FormatError);
  CHECK_THROWS_AS(nova::TokenFile::open(dir.file("missing.bin"), nova::TokenFormat::u8), nova::Error);

  std::vector<std::uint16_t> too_big = {1, 2, 256};
  CHECK_THROWS_WITH_AS(nova::write_tokens(dir.file("u8.bin"), too_big, nova::TokenFormat::u8),
                       doctest::Contains("token 256 at position 2 does not fit the u8 format"), nova::Error);
  CHECK_FALSE(fs::exists(dir.file("u8.bin")));
  CHECK_THROWS_AS(nova::write_tokens(dir.file("none.bin"), std::vector<std::uint16_t>{}, nova::TokenFormat::u16),
                  nova::Error);
  CHECK_FALSE(fs::exists(dir.file("none.bin")));
}

TEST_CASE("tokens: splitmix64 matches the reference sequence") {
  std::uint64_t state = 0;
  CHECK(nova::splitmix64(state) == 0xE220A8397B1DCDAFull);
  CHECK(nova::splitmix64(state) == 0x6E789E6AA1B965F4ull);
  CHECK(nova::splitmix64(state) == 0x06C45D188009454Full);
}

namespace {
/// A token file whose token i is i % 60000, so a window's start can be read
/// off its first token.
nova::TokenFile counting_file(const TempDir& dir, std::int64_t n) {
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(i % 60000);
  nova::write_tokens(dir.file("count.bin"), tokens, nova::TokenFormat::u16);
  return nova::TokenFile::open(dir.file("count.bin"), nova::TokenFormat::u16);
}
} // namespace

TEST_CASE("tokens: sample_batch windows are contiguous, y is x shifted by one") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  nova::TokenFile file = counting_file(dir, 5000);
  std::uint64_t state = seed;
  nova::TokenBatch b = nova::sample_batch(file, 6, 16, state);
  CHECK(b.x.spec() == nova::TensorSpec{DType::i32, {6, 16}});
  CHECK(b.y.spec() == nova::TensorSpec{DType::i32, {6, 16}});
  CHECK(state != seed);
  const std::int32_t* x = b.x.data<std::int32_t>();
  const std::int32_t* y = b.y.data<std::int32_t>();
  for (int r = 0; r < 6; ++r) {
    const std::int32_t start = x[r * 16];
    CHECK(start >= 0);
    CHECK(start <= 5000 - 16 - 1);
    for (int t = 0; t < 16; ++t) {
      CHECK(x[r * 16 + t] == start + t);
      CHECK(y[r * 16 + t] == start + t + 1);
    }
  }
}

TEST_CASE("tokens: sample_batch is reproducible from a seed and differs across seeds") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  nova::TokenFile file = counting_file(dir, 20000);
  std::uint64_t s1 = seed, s2 = seed, s3 = seed + 1;
  for (int step = 0; step < 3; ++step) {
    nova::TokenBatch a = nova::sample_batch(file, 8, 32, s1);
    nova::TokenBatch b = nova::sample_batch(file, 8, 32, s2);
    nova::TokenBatch c = nova::sample_batch(file, 8, 32, s3);
    CHECK(a.x.to_vector() == b.x.to_vector());
    CHECK(a.y.to_vector() == b.y.to_vector());
    CHECK(a.x.to_vector() != c.x.to_vector());
  }
  CHECK(s1 == s2);
}

TEST_CASE("tokens: sample_batch reaches every start, including the last") {
  const std::uint64_t seed = seed_here();
  INFO("seed = " << seed);
  TempDir dir;
  nova::TokenFile file = counting_file(dir, 12); // context 8: starts 0..3
  std::uint64_t state = seed;
  std::set<std::int32_t> starts;
  for (int i = 0; i < 50; ++i) {
    nova::TokenBatch b = nova::sample_batch(file, 4, 8, state);
    for (int r = 0; r < 4; ++r) starts.insert(b.x.data<std::int32_t>()[r * 8]);
  }
  CHECK(starts == std::set<std::int32_t>{0, 1, 2, 3});

  // Exactly context + 1 tokens: one window only.
  nova::TokenBatch only = nova::sample_batch(file, 2, 11, state);
  CHECK(only.x.at({1, 0}) == 0.0);
  CHECK(only.y.at({1, 10}) == 11.0);
}

TEST_CASE("tokens: a file too short for the context, and bad arguments, are errors") {
  TempDir dir;
  nova::TokenFile file = counting_file(dir, 10);
  std::uint64_t state = 1;
  CHECK_THROWS_WITH_AS(nova::sample_batch(file, 2, 10, state),
                       doctest::Contains("holds 10 tokens; a context of 10 needs at least 10 + 1"),
                       nova::Error);
  CHECK_THROWS_AS(nova::sample_batch(file, 0, 4, state), nova::Error);
  CHECK_THROWS_AS(nova::sample_batch(file, 2, 0, state), nova::Error);
  CHECK_THROWS_AS(nova::sample_batch(file, std::int64_t{1} << 40, std::int64_t{1} << 40, state), nova::Error);
  CHECK(state == 1);
  CHECK_THROWS_AS(nova::sequential_batch(file, 1, 10, 0), nova::Error);
}

TEST_CASE("tokens: sequential_batch tiles the file from a start") {
  TempDir dir;
  nova::TokenFile file = counting_file(dir, 100);
  nova::TokenBatch b = nova::sequential_batch(file, 3, 10, 5);
  CHECK(b.x.to_vector()[0] == 5);
  CHECK(b.x.at({1, 0}) == 15.0);
  CHECK(b.x.at({2, 9}) == 34.0);
  CHECK(b.y.at({2, 9}) == 35.0);
  CHECK(nova::sequential_batch_count(file, 3, 10) == 3); // 99 / 30
  for (std::int64_t k = 0; k < 3; ++k) CHECK_NOTHROW(nova::sequential_batch(file, 3, 10, k * 30));
  CHECK_NOTHROW(nova::sequential_batch(file, 3, 11, 66)); // last target is token 99
  CHECK_THROWS_AS(nova::sequential_batch(file, 3, 11, 67), nova::Error);
  CHECK_THROWS_AS(nova::sequential_batch(file, 3, 10, -1), nova::Error);
}

TEST_CASE("a writer killed mid-save leaves no temporary file behind after the next save") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  // A process that has exited: its pid names a writer that can never commit.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(dead > 0);
  ::waitpid(dead, nullptr, 0);
  const std::string orphan = "ckpt.safetensors.tmp." + std::to_string(dead) + ".0";
  const std::string live = "ckpt.safetensors.tmp.1.0";                  // pid 1 is alive
  const std::string other = "other.safetensors.tmp." + std::to_string(dead) + ".0"; // another file's
  for (const auto& name : {orphan, live, other}) write_bytes(dir.file(name), "partial");
  nova::save_safetensors(path, {{"x", Tensor::full({2}, 1.0)}});
  std::set<std::string> names = dir.listing();
  CHECK(names.count(orphan) == 0);
  CHECK(names.count(live) == 1);
  CHECK(names.count(other) == 1);
  CHECK(names.count("ckpt.safetensors") == 1);
}
