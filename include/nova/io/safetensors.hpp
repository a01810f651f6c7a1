// safetensors.hpp - saving and loading tensors (and Params) as .safetensors.
//
// The format is Hugging Face's: an 8-byte little-endian header length N, N
// bytes of JSON mapping each tensor name to its dtype, shape and byte range
// (relative to the end of the header), an optional "__metadata__" object of
// strings, then the raw little-endian data, exactly covered by the ranges.
// Nova reads and writes the dtypes it has: F32, F64, I32, I64.
//
// Saving is atomic: the file is written beside its destination under a
// temporary name, synced, then renamed over it, so a failed or interrupted
// save never leaves a half-written checkpoint where the old one was.
// Loading validates every byte of the header before it allocates anything, so
// a corrupt or hostile file throws nova::FormatError instead of crashing.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nova/params.hpp"
#include "nova/tensor.hpp"

namespace nova {

/// Writes `tensors` (in this order; names must be unique and not
/// "__metadata__") and `metadata` to `path`, replacing any file there only
/// once the new one is complete. Non-contiguous tensors are written row-major.
/// Throws nova::Error on bad arguments or I/O failure; the old file survives.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// The contents of a .safetensors file: tensors in the order of their data in
/// the file, zero-size ties in header order (so for files Nova wrote, the
/// order they were saved in).
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads and validates a whole file. Throws nova::FormatError naming the file
/// and the problem if it is malformed, nova::Error if it cannot be read.
SafetensorsFile load_safetensors(const std::string& path);

/// Saves every parameter under its name.
void save(const Params& params, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});

/// Loads a checkpoint into `params` in place: every parameter must be in the
/// file with its dtype and shape (else nova::FormatError naming it, and
/// `params` is left untouched). Tensors in the file that `params` lacks are
/// ignored.
void load(Params& params, const std::string& path);

} // namespace nova
