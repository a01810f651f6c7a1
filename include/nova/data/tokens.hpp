// tokens.hpp - byte-level tokenization, token files and training batches.
//
// A token file is a flat array of little-endian u8 or u16 tokens with no
// header, like nanoGPT's train.bin. Byte-level tokenization maps each byte of
// the text to one token (vocabulary 256), so any file can be trained on.
// sample_batch draws start offsets with splitmix64 on a caller-owned state,
// whose output is fixed by its definition (std::uniform_int_distribution's is
// not), so a seed gives the same batches on every platform and compiler.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nova/tensor.hpp"

namespace nova {

/// One token per byte of `text`, token = byte value.
std::vector<std::uint8_t> tokenize_bytes(std::string_view text);
/// The inverse of tokenize_bytes.
std::string detokenize_bytes(std::span<const std::uint8_t> tokens);
/// Tokens as a model emits them (e.g. sampled i32 ids); throws nova::Error if
/// one is outside [0, 255].
std::string detokenize_bytes(std::span<const std::int32_t> tokens);

/// Width of each token on disk.
enum class TokenFormat { u8, u16 };

/// Bytes per token in `fmt`.
constexpr std::int64_t token_size(TokenFormat fmt) { return fmt == TokenFormat::u8 ? 1 : 2; }

/// Writes `tokens` to `path` atomically (temporary file, fsync, rename).
/// Throws nova::Error if `tokens` is empty, for a token above 255 in u8
/// format, or on I/O failure.
void write_tokens(const std::string& path, std::span<const std::uint16_t> tokens, TokenFormat fmt);
void write_tokens(const std::string& path, std::span<const std::uint8_t> tokens, TokenFormat fmt);

/// A token file, read whole into memory.
class TokenFile {
 public:
  /// Throws nova::Error if the file cannot be read, nova::FormatError if it is
  /// empty or its size is not a multiple of the token size.
  static TokenFile open(const std::string& path, TokenFormat fmt);

  const std::string& path() const { return path_; }
  TokenFormat format() const { return format_; }
  /// Number of tokens.
  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }
  /// Token `i`; throws nova::Error if `i` is out of range.
  std::uint32_t operator[](std::int64_t i) const;
  /// The largest token in the file (a lower bound for the vocabulary - 1).
  int max_token() const { return max_token_; }
  /// All tokens.
  std::span<const std::uint16_t> tokens() const { return tokens_; }

 private:
  std::string path_;
  TokenFormat format_ = TokenFormat::u16;
  std::vector<std::uint16_t> tokens_;
  int max_token_ = 0;
};

/// Inputs and next-token targets, both i32 [batch, context]: y[b][t] is the
/// token after x[b][t].
struct TokenBatch {
  Tensor x, y;
};

/// Advances `state` and returns the next splitmix64 output (Steele, Lea and
/// Flood, 2014): a fixed, portable sequence for each starting state.
std::uint64_t splitmix64(std::uint64_t& state);

/// `batch` windows at start offsets drawn uniformly (without bias) from
/// [0, size - context - 1] with splitmix64 on `rng_state`, which advances.
/// Throws nova::Error if batch or context is below 1 or the file holds fewer
/// than context + 1 tokens.
TokenBatch sample_batch(const TokenFile& file, std::int64_t batch, std::int64_t context,
                        std::uint64_t& rng_state);

/// Consecutive windows for evaluation: row b starts at start + b * context.
/// Throws nova::Error unless start >= 0 and start + batch * context + 1 <= size.
TokenBatch sequential_batch(const TokenFile& file, std::int64_t batch, std::int64_t context,
                            std::int64_t start);

/// How many sequential batches fit: the batches at start = 0, batch * context,
/// 2 * batch * context, ... up to the end of the file.
std::int64_t sequential_batch_count(const TokenFile& file, std::int64_t batch, std::int64_t context);

} // namespace nova
