// executable_desc.hpp - the executable description: the contract between the
// compiler and the runtime.
//
// A compiled step is kernels plus a launch plan. This record says all of it,
// with no MLIR and no pointers: the kernels' object code (for the CPU an ELF
// shared object exporting `void <symbol>(int64_t workgroup, void* const*
// args)`), the plan (kernels in order, each over a grid of workgroups, each
// argument a step input, a step output or an offset into one arena), the
// arena's size, the step's signature with its in-place aliases, and room for
// collective points (data-parallel all-reduces). It is what the on-disk cache
// stores, what an ahead-of-time build ships and what the runtime loads.
//
// serialize() writes a versioned, checksummed byte string; deserialize()
// validates every field (counts, indices, sizes, offsets, the checksum)
// before anything uses it and throws nova::FormatError naming the problem,
// so a corrupt or foreign file can never crash the runtime or run a wrong kernel.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nova/executable.hpp"
#include "nova/target.hpp"
#include "nova/tensor.hpp"

namespace nova {

/// Bumped whenever the byte layout or the kernel ABI changes.
inline constexpr std::uint32_t executable_format_version = 8;

/// The compiler's version string; entries from another version are stale.
std::string compiler_version();

/// Where a kernel argument lives.
struct BufferRef {
  enum class Kind : std::uint8_t { input = 0, output = 1, arena = 2 };
  Kind kind = Kind::arena;
  /// Step input or output number (input/output), unused for arena.
  std::uint32_t index = 0;
  /// Byte offset: into the arena, or 0.
  std::uint64_t offset = 0;
  /// Bytes the kernel may touch.
  std::uint64_t bytes = 0;
  friend bool operator==(const BufferRef&, const BufferRef&) = default;
};

/// What a tensor map's elements are. The byte a description stores:
/// DType's numbers for its types, then the 16-bit floats a step's bf16 (or
/// f16) matmul operands are.
enum class MapElement : std::uint8_t { f32 = 0, f64 = 1, i32 = 2, i64 = 3, bf16 = 4, f16 = 5 };
constexpr std::size_t size_of(MapElement e) {
  return e == MapElement::f64 || e == MapElement::i64 ? 8 : e == MapElement::bf16 || e == MapElement::f16 ? 2 : 4;
}

/// A GPU kernel argument the runtime passes as a TMA tensor map: the
/// device address of a 128-byte CUtensorMap it encodes (once, at load) over
/// the launch's buffer for that argument, a tiled view of it.
struct TensorMapDesc {
  /// The kernel argument.
  std::uint32_t arg = 0;
  /// The elements (f32 also for tf32 operands).
  MapElement element = MapElement::f32;
  /// Elements per dimension and the box one load copies, fastest first;
  /// bytes between indices of dimensions 1, 2, ... (dimension 0 is contiguous).
  std::vector<std::uint64_t> dims, strides, box;
  /// The box rows' swizzle in shared memory: 0, 32, 64 or 128 bytes.
  std::uint32_t swizzle_bytes = 0;
  friend bool operator==(const TensorMapDesc&, const TensorMapDesc&) = default;
};

struct KernelDesc {
  /// Exported symbol in the object code.
  std::string symbol;
  /// What it computes, for humans: "matmul 2048x768x256 f32", "loops linalg.generic 16x128x256 f32".
  std::string summary;
  /// Per launch (all workgroups): arithmetic operations, and the fewest
  /// bytes it must move (each buffer it touches read or written once).
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  /// GPU kernels: threads per block (1..1024) and dynamic shared memory
  /// per block in bytes; 0 and 0 for the CPU.
  std::uint32_t threads = 0;
  std::uint32_t shared_bytes = 0;
  /// GPU kernels: the CTAs a cluster along x (1: none; else the launch
  /// gives the driver's cluster attribute, and its workgroups are whole
  /// clusters).
  std::uint32_t cluster = 1;
  /// GPU kernels: the arguments passed as TMA tensor maps (none for most).
  std::vector<TensorMapDesc> tensor_maps;
  friend bool operator==(const KernelDesc&, const KernelDesc&) = default;
};

struct LaunchDesc {
  std::uint32_t kernel = 0;
  /// Workgroups 0..workgroups-1 may run in any order, on any threads (on
  /// a GPU: the grid's blocks).
  std::uint64_t workgroups = 1;
  std::vector<BufferRef> args;
  friend bool operator==(const LaunchDesc&, const LaunchDesc&) = default;
};

/// Data-parallel training: a sum over the group's ranks of each of
/// `buffers` (elements of `dtype`, f32 or f64), in place, that starts once
/// `after_launch` launches have run and is waited for before launch
/// `before_launch` runs (`launches.size()`: before the step returns). The
/// runtime runs it on the calling thread's communicator (nova/distributed.hpp).
struct CollectiveDesc {
  enum class Kind : std::uint8_t { all_reduce_sum = 0 };
  Kind kind = Kind::all_reduce_sum;
  DType dtype = DType::f32;
  std::uint32_t after_launch = 0;
  std::uint32_t before_launch = 0;
  std::vector<BufferRef> buffers;
  friend bool operator==(const CollectiveDesc&, const CollectiveDesc&) = default;
};

/// The bytes of one tensor of `spec`.
std::uint64_t bytes_of(const TensorSpec& spec);

/// The bytes of a step's buffers besides its arena: one for each input and
/// for each output not written into an input (`aliases`: one per output,
/// the input it is written into, or -1).
std::uint64_t io_bytes(std::span<const TensorSpec> inputs, std::span<const TensorSpec> outputs,
                       std::span<const int> aliases);

struct ExecutableDesc {
  std::string compiler_version;
  /// The cache key it was compiled for (structural hash of the traced step +
  /// target + compiler version + code-changing options), 128 bits.
  std::array<std::uint64_t, 2> key{};
  TargetDesc target;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  /// One per output: the input it is written into in place, or -1.
  std::vector<int> aliases;
  std::uint64_t arena_bytes = 0;
  std::vector<KernelDesc> kernels;
  std::vector<LaunchDesc> launches;
  std::vector<CollectiveDesc> collectives;
  /// "elf-shared-object" for the CPU; "ptx" (text, kernels `nova_<kernel>`
  /// taking one device pointer per argument) for CUDA.
  std::string object_format;
  std::vector<std::uint8_t> object;
  /// The object assembled for the target's chip where the compiling machine
  /// could: "cubin" (an ELF of `object`'s PTX by ptxas), which the CUDA
  /// runtime loads first, falling back to the PTX where the driver refuses
  /// it; or "" and empty.
  std::string binary_format;
  std::vector<std::uint8_t> binary;

  std::vector<std::uint8_t> serialize() const;
  /// Throws FormatError (prefixed with `what`, e.g. the file name) on any
  /// malformed, truncated, corrupted or newer-version input.
  static ExecutableDesc deserialize(std::span<const std::uint8_t> bytes,
                                    const std::string& what = "executable");
  /// The structural checks deserialize() runs (indices, sizes, offsets).
  void validate(const std::string& what = "executable") const;
  friend bool operator==(const ExecutableDesc&, const ExecutableDesc&) = default;
};

/// Loads the description's code and returns a runnable executable (kind
/// "cpu"). Throws nova::Error if the machine lacks a feature the code needs
/// or the object cannot be loaded.
std::shared_ptr<Executable> load_executable(const ExecutableDesc& desc);

/// The description as an executable this machine cannot run (it was compiled
/// for another target, NOVA_TARGET): it can be saved (nova::aot::save), and
/// running it throws nova::Error with `why`.
std::shared_ptr<Executable> unloadable_executable(ExecutableDesc desc, std::string why);

/// load_executable(), or unloadable_executable() when this machine lacks a
/// feature the code needs.
std::shared_ptr<Executable> load_or_describe(const ExecutableDesc& desc);

/// Files: atomic write (temporary file + rename); read validates as
/// deserialize() does.
void write_executable_file(const std::string& path, const ExecutableDesc& desc);
ExecutableDesc read_executable_file(const std::string& path);

} // namespace nova
