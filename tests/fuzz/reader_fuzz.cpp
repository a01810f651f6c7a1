// reader_fuzz.cpp - every reader fed garbage: each rejection must be a named
// error (nova::FormatError or nova::Error, with a message), never a crash,
// a hang, another exception or a silent acceptance of a corrupted file.
//
//   reader_fuzz READER CORPUS_DIR ITERATIONS [SEED]
//   READER: safetensors | tokens | executable
//
// The harnesses have libFuzzer's signature (LLVMFuzzerTestOneInput-style:
// bytes in, 0 out). Built with -DNOVA_LIBFUZZER (tests/fuzz/libfuzzer.sh,
// clang's -fsanitize=fuzzer) the file is a libFuzzer target for the reader
// $NOVA_FUZZ_READER names, coverage-guided. Otherwise this driver, which
// needs no libFuzzer (GCC has none), runs every corpus file and then
// ITERATIONS deterministic mutations of them (bit flips, interesting bytes,
// truncations, extensions, duplicated and spliced chunks, overwritten
// length fields) from SEED. Under the sanitizer build (NOVA_SANITIZE) a
// memory error in a reader aborts the run.
//
// The executable description is checksummed: a mutated file is refused at
// the checksum. NOVA_FUZZ_JSON=<file> writes the run's numbers there.
// So each mutation is tried twice: raw, and resealed (a valid
// header and XXH3 checksum around the mutated body), which reaches the field
// parser and the plan's validation.
#include <nova/data/tokens.hpp>
#include <nova/error.hpp>
#include <nova/executable_desc.hpp>
#include <nova/io/safetensors.hpp>

#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

std::string scratch_path(const char* ext) {
  return (fs::temp_directory_path() / ("nova-reader-fuzz-" + std::to_string(::getpid()) + ext)).string();
}

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

/// Inputs a reader accepted (the corpus must be; mutations mostly are not).
long accepted = 0;

/// Runs `read`; 0 when it accepted or refused with a named error, 1 when it
/// threw anything else or an error without a message.
template <class F> int named_or_accepted(const char* reader, F&& read) {
  try {
    read();
    ++accepted;
    return 0;
  } catch (const nova::Error& e) {
    if (std::strlen(e.what()) < 8) {
      std::fprintf(stderr, "%s: a rejection without a message: '%s'\n", reader, e.what());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: an unnamed error escaped the reader: %s\n", reader, e.what());
    return 1;
  }
}

int fuzz_safetensors(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path(".safetensors");
  write_file(path, data, size);
  return named_or_accepted("safetensors", [] {
    nova::SafetensorsFile f = nova::load_safetensors(path);
    for (auto& [name, t] : f.tensors) (void)t.to_vector(); // touch every element read
  });
}

int fuzz_tokens(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path(".tokens");
  write_file(path, data, size);
  int bad = 0;
  for (auto fmt : {nova::TokenFormat::u8, nova::TokenFormat::u16})
    bad |= named_or_accepted("tokens", [&] {
      nova::TokenFile f = nova::TokenFile::open(path, fmt);
      if (f.size() > 4) {
        std::uint64_t state = size;
        (void)nova::sample_batch(f, 2, 3, state);
      }
    });
  return bad;
}

/// magic | u32 version | u64 body length | body | u64 XXH3-64(body).
Bytes sealed(const std::uint8_t* body, std::size_t size) {
  Bytes out{'N', 'O', 'V', 'A', 'E', 'X', 'E', '\0'};
  auto put = [&](std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  put(nova::executable_format_version, 4);
  put(size, 8);
  out.insert(out.end(), body, body + size);
  put(XXH3_64bits(body, size), 8);
  return out;
}

int fuzz_executable(const std::uint8_t* data, std::size_t size) {
  int bad = named_or_accepted("executable", [&] {
    (void)nova::ExecutableDesc::deserialize(std::span<const std::uint8_t>(data, size), "fuzzed");
  });
  // The body of a whole file (20-byte header, 8-byte checksum), resealed.
  if (size >= 28) {
    Bytes again = sealed(data + 20, size - 28);
    bad |= named_or_accepted("executable (resealed)", [&] {
      (void)nova::ExecutableDesc::deserialize(again, "resealed");
    });
  }
  return bad;
}

struct Rng {
  std::uint64_t s;
  std::uint64_t next() { return nova::splitmix64(s); }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

Bytes mutate(const std::vector<Bytes>& corpus, Rng& r) {
  Bytes b = corpus[r.below(corpus.size())];
  int rounds = 1 + int(r.below(4));
  for (int k = 0; k < rounds; ++k) {
    switch (r.below(7)) {
    case 0: // flip a bit
      if (!b.empty()) b[r.below(b.size())] ^= std::uint8_t(1u << r.below(8));
      break;
    case 1: { // an interesting byte
      static const std::uint8_t values[] = {0x00, 0xff, 0x7f, 0x80, 0x01, '"', '{', '}', ',', ':'};
      if (!b.empty()) b[r.below(b.size())] = values[r.below(sizeof values)];
      break;
    }
    case 2: // truncate
      b.resize(r.below(b.size() + 1));
      break;
    case 3: // extend with random bytes
      for (std::size_t i = 0, n = 1 + r.below(64); i < n; ++i) b.push_back(std::uint8_t(r.next()));
      break;
    case 4: { // duplicate a chunk in place
      if (b.size() < 2) break;
      std::size_t at = r.below(b.size()), len = 1 + r.below(std::min<std::size_t>(32, b.size() - at));
      Bytes chunk(b.begin() + std::ptrdiff_t(at), b.begin() + std::ptrdiff_t(at + len));
      b.insert(b.begin() + std::ptrdiff_t(r.below(b.size())), chunk.begin(), chunk.end());
      break;
    }
    case 5: { // splice another corpus entry's tail
      const Bytes& other = corpus[r.below(corpus.size())];
      std::size_t cut = r.below(b.size() + 1), from = r.below(other.size() + 1);
      b.resize(cut);
      b.insert(b.end(), other.begin() + std::ptrdiff_t(from), other.end());
      break;
    }
    default: { // overwrite 8 bytes with a huge or negative length
      static const std::uint64_t values[] = {0, 1, 0xffffffffffffffffull, 0x7fffffffffffffffull,
                                             0x100000000ull, 0xffffffffull};
      if (b.size() < 8) break;
      std::uint64_t v = values[r.below(6)];
      std::memcpy(b.data() + r.below(b.size() - 7), &v, 8);
      break;
    }
    }
  }
  return b;
}

} // namespace

using Harness = int (*)(const std::uint8_t*, std::size_t);

Harness harness_named(const std::string& reader) {
  return reader == "safetensors" ? fuzz_safetensors
         : reader == "tokens"    ? fuzz_tokens
         : reader == "executable" ? fuzz_executable
                                  : nullptr;
}

#ifdef NOVA_LIBFUZZER

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Harness harness = [] {
    const char* reader = std::getenv("NOVA_FUZZ_READER");
    Harness h = reader ? harness_named(reader) : nullptr;
    if (!h) {
      std::fprintf(stderr, "reader_fuzz: set NOVA_FUZZ_READER to safetensors, tokens or executable\n");
      std::abort();
    }
    return h;
  }();
  // An unnamed failure is a finding: abort, so libFuzzer keeps the input.
  if (harness(data, size) != 0) std::abort();
  return 0;
}

#else

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: reader_fuzz safetensors|tokens|executable CORPUS_DIR ITERATIONS [SEED]\n");
    return 2;
  }
  std::string reader = argv[1];
  Harness harness = harness_named(reader);
  if (!harness) {
    std::fprintf(stderr, "reader_fuzz: unknown reader %s\n", argv[1]);
    return 2;
  }
  std::vector<Bytes> corpus;
  for (const auto& e : fs::directory_iterator(argv[2])) {
    std::ifstream in(e.path(), std::ios::binary);
    corpus.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "reader_fuzz: no corpus files in %s\n", argv[2]);
    return 2;
  }
  long iterations = std::atol(argv[3]);
  Rng r{argc > 4 ? std::strtoull(argv[4], nullptr, 0) : 1};
  int failures = 0;
  for (const Bytes& b : corpus) {
    long before = accepted;
    failures += harness(b.data(), b.size());
    if (accepted == before) {
      std::fprintf(stderr, "reader_fuzz: a corpus file is refused: the corpus must be valid inputs\n");
      ++failures;
    }
  }
  long corpusAccepted = accepted;
  for (long i = 0; i < iterations; ++i) {
    Bytes b = mutate(corpus, r);
    if (harness(b.data(), b.size()) != 0) {
      ++failures;
      std::string keep = "reader-fuzz-failure-" + reader + "-" + std::to_string(i);
      write_file(keep, b.data(), b.size());
      std::fprintf(stderr, "  input kept as %s\n", keep.c_str());
    }
  }
  for (const char* ext : {".safetensors", ".tokens"}) std::remove(scratch_path(ext).c_str());
  if (const char* path = std::getenv("NOVA_FUZZ_JSON"))
    if (FILE* f = std::fopen(path, "w")) { // the run's numbers, for CI's reliability.json
      std::fprintf(f, "{\"reader\": \"%s\", \"corpus_files\": %zu, \"mutations\": %ld, \"accepted\": %ld, "
                      "\"unnamed_failures\": %d}\n",
                   reader.c_str(), corpus.size(), iterations, accepted - corpusAccepted, failures);
      std::fclose(f);
    }
  std::printf("reader_fuzz %s: %zu corpus files, %ld mutations (%ld reads accepted), %d unnamed failures\n",
              reader.c_str(), corpus.size(), iterations, accepted - corpusAccepted, failures);
  return failures == 0 ? 0 : 1;
}

#endif // NOVA_LIBFUZZER
