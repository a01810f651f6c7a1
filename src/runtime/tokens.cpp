// tokens.cpp - byte tokenization, token files and batch sampling.
//
// Token files are decoded into u16 in memory whatever their width on disk, so
// batching has one code path. Batches are i32 tensors, the dtype Nova's
// cross-entropy takes for labels (and embeddings for ids).
#include "nova/data/tokens.hpp"

#include <algorithm>
#include <bit>

#include "file_io.hpp"

namespace nova {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; this reader copies u16 tokens as is");

std::string format_name(TokenFormat fmt) { return fmt == TokenFormat::u8 ? "u8" : "u16"; }

/// Uniform in [0, n) without modulo bias: rejects the lowest 2^64 mod n
/// outputs, so every residue is hit equally often.
std::uint64_t uniform_below(std::uint64_t n, std::uint64_t& state) {
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    std::uint64_t r = splitmix64(state);
    if (r >= threshold) return r % n;
  }
}

/// Checks the window arguments shared by both batch functions.
void check_windows(const char* who, const TokenFile& file, std::int64_t batch, std::int64_t context) {
  const std::string where = std::string("nova::") + who + ": ";
  if (batch < 1) throw Error(where + "batch must be at least 1, not " + std::to_string(batch));
  if (context < 1) throw Error(where + "context must be at least 1, not " + std::to_string(context));
  std::int64_t cells;
  if (__builtin_mul_overflow(batch, context, &cells))
    throw Error(where + "batch " + std::to_string(batch) + " x context " + std::to_string(context) +
                " overflows");
  if (file.size() <= context)
    throw Error(where + file.path() + " holds " + std::to_string(file.size()) +
                " tokens; a context of " + std::to_string(context) + " needs at least " +
                std::to_string(context) + " + 1 (inputs and their next-token targets)");
}

/// x[b] = tokens[starts[b] : +context], y[b] = tokens[starts[b] + 1 : +context].
TokenBatch gather(const TokenFile& file, std::span<const std::int64_t> starts, std::int64_t context) {
  const auto batch = static_cast<std::int64_t>(starts.size());
  TokenBatch out{Tensor::empty({batch, context}, DType::i32), Tensor::empty({batch, context}, DType::i32)};
  std::int32_t* x = out.x.data<std::int32_t>();
  std::int32_t* y = out.y.data<std::int32_t>();
  auto tokens = file.tokens();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::uint16_t* window = tokens.data() + starts[static_cast<std::size_t>(b)];
    for (std::int64_t t = 0; t < context; ++t) {
      x[b * context + t] = window[t];
      y[b * context + t] = window[t + 1];
    }
  }
  return out;
}

/// TokenFile::open rejects empty files, so nothing writes one.
void check_not_empty(const std::string& path, std::size_t count) {
  if (count == 0)
    throw Error("nova::write_tokens: " + path + ": no tokens to write (a token file holds at least one)");
}

} // namespace

std::vector<std::uint8_t> tokenize_bytes(std::string_view text) {
  std::vector<std::uint8_t> tokens(text.size());
  std::transform(text.begin(), text.end(), tokens.begin(),
                 [](char c) { return static_cast<std::uint8_t>(c); });
  return tokens;
}

std::string detokenize_bytes(std::span<const std::uint8_t> tokens) {
  std::string text(tokens.size(), '\0');
  std::transform(tokens.begin(), tokens.end(), text.begin(),
                 [](std::uint8_t t) { return static_cast<char>(t); });
  return text;
}

std::string detokenize_bytes(std::span<const std::int32_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 255)
      throw Error("nova::detokenize_bytes: token " + std::to_string(tokens[i]) + " at position " +
                  std::to_string(i) + " is not a byte (0..255)");
    text.push_back(static_cast<char>(static_cast<std::uint8_t>(tokens[i])));
  }
  return text;
}

void write_tokens(const std::string& path, std::span<const std::uint16_t> tokens, TokenFormat fmt) {
  check_not_empty(path, tokens.size());
  if (fmt == TokenFormat::u16) {
    detail::AtomicFileWriter out(path);
    out.write(tokens.data(), tokens.size_bytes());
    out.commit();
    return;
  }
  std::vector<std::uint8_t> bytes(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > 255)
      throw Error("nova::write_tokens: " + path + ": token " + std::to_string(tokens[i]) +
                  " at position " + std::to_string(i) + " does not fit the u8 format; use u16");
    bytes[i] = static_cast<std::uint8_t>(tokens[i]);
  }
  write_tokens(path, std::span<const std::uint8_t>(bytes), TokenFormat::u8);
}

void write_tokens(const std::string& path, std::span<const std::uint8_t> tokens, TokenFormat fmt) {
  check_not_empty(path, tokens.size());
  if (fmt == TokenFormat::u16) {
    std::vector<std::uint16_t> wide(tokens.begin(), tokens.end());
    write_tokens(path, std::span<const std::uint16_t>(wide), TokenFormat::u16);
    return;
  }
  detail::AtomicFileWriter out(path);
  out.write(tokens.data(), tokens.size_bytes());
  out.commit();
}

TokenFile TokenFile::open(const std::string& path, TokenFormat fmt) {
  detail::InputFile in(path);
  const std::uint64_t bytes = in.size();
  const auto width = static_cast<std::uint64_t>(token_size(fmt));
  if (bytes == 0) throw FormatError("nova::TokenFile: " + path + " is empty");
  if (bytes % width != 0)
    throw FormatError("nova::TokenFile: " + path + " has " + std::to_string(bytes) +
                      " bytes, not a multiple of " + std::to_string(width) + " (" +
                      format_name(fmt) + " tokens)");

  TokenFile file;
  file.path_ = path;
  file.format_ = fmt;
  file.tokens_.resize(static_cast<std::size_t>(bytes / width));
  if (fmt == TokenFormat::u16) {
    in.read_at(0, file.tokens_.data(), static_cast<std::size_t>(bytes));
  } else {
    std::vector<std::uint8_t> raw(static_cast<std::size_t>(bytes));
    in.read_at(0, raw.data(), raw.size());
    std::copy(raw.begin(), raw.end(), file.tokens_.begin());
  }
  file.max_token_ = *std::max_element(file.tokens_.begin(), file.tokens_.end());
  return file;
}

std::uint32_t TokenFile::operator[](std::int64_t i) const {
  if (i < 0 || i >= size())
    throw Error("nova::TokenFile: index " + std::to_string(i) + " is outside " + path_ + " (" +
                std::to_string(size()) + " tokens)");
  return tokens_[static_cast<std::size_t>(i)];
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TokenBatch sample_batch(const TokenFile& file, std::int64_t batch, std::int64_t context,
                        std::uint64_t& rng_state) {
  check_windows("sample_batch", file, batch, context);
  const auto choices = static_cast<std::uint64_t>(file.size() - context); // starts 0 .. size-context-1
  std::vector<std::int64_t> starts(static_cast<std::size_t>(batch));
  for (auto& s : starts) s = static_cast<std::int64_t>(uniform_below(choices, rng_state));
  return gather(file, starts, context);
}

TokenBatch sequential_batch(const TokenFile& file, std::int64_t batch, std::int64_t context,
                            std::int64_t start) {
  check_windows("sequential_batch", file, batch, context);
  std::int64_t last = 0; // index of the last target: start + batch * context
  if (start < 0 || __builtin_add_overflow(start, batch * context, &last) || last >= file.size())
    throw Error("nova::sequential_batch: " + std::to_string(batch) + " windows of " +
                std::to_string(context) + " tokens from " + std::to_string(start) +
                " need tokens up to index " + std::to_string(start) + " + " +
                std::to_string(batch * context) + ", but " + file.path() + " holds " +
                std::to_string(file.size()));
  std::vector<std::int64_t> starts(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) starts[static_cast<std::size_t>(b)] = start + b * context;
  return gather(file, starts, context);
}

std::int64_t sequential_batch_count(const TokenFile& file, std::int64_t batch, std::int64_t context) {
  check_windows("sequential_batch_count", file, batch, context);
  return (file.size() - 1) / (batch * context);
}

} // namespace nova
