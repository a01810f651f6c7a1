// executable_desc.cpp - the executable description's byte format.
//
// Layout (little-endian):
//   "NOVAEXE\0" | u32 format version | u64 body length | body | u64 XXH3-64 of body
// The checksum covers the whole body, so any flipped bit or truncation is
// caught before a single field is trusted; then every field is read with
// bounds checks and validate() checks that the plan only touches memory that
// exists (argument indices, sizes against the specs, arena offsets).
#include "nova/executable_desc.hpp"

#include <xxhash.h>

#include <algorithm>
#include <vector>

#include "bytes.hpp"
#include "file_io.hpp"
#include "tensor_map.hpp"
#include "gpu_target.hpp"

namespace nova {
namespace {

constexpr char kMagic[8] = {'N', 'O', 'V', 'A', 'E', 'X', 'E', '\0'};
constexpr std::uint64_t kMaxRank = 16;

using detail::ByteReader;
using detail::ByteWriter;

void put_spec(ByteWriter& w, const TensorSpec& s) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.dtype));
  w.put<std::uint64_t>(s.shape.size());
  for (auto d : s.shape) w.put<std::int64_t>(d);
}

TensorSpec get_spec(ByteReader& r) {
  TensorSpec s;
  auto dtype = r.get<std::uint8_t>("dtype");
  if (dtype > static_cast<std::uint8_t>(DType::i64)) r.fail("unknown dtype " + std::to_string(dtype));
  s.dtype = static_cast<DType>(dtype);
  auto rank = r.count("rank", 8);
  if (rank > kMaxRank) r.fail("rank " + std::to_string(rank) + " is above " + std::to_string(kMaxRank));
  // Each dimension and their product at most 2^40 elements, so that
  // numel() and the byte counts from it cannot overflow (libFuzzer found a
  // rank-2 shape of 2^32-sized dimensions that did).
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
  std::int64_t elements = 1;
  for (std::uint64_t i = 0; i < rank; ++i) {
    auto d = r.get<std::int64_t>("dim");
    if (d < 0 || d > kMaxElements) r.fail("dimension " + std::to_string(d) + " out of range");
    if (d != 0 && elements > kMaxElements / d) r.fail("a tensor of more than 2^40 elements");
    elements *= d;
    s.shape.push_back(d);
  }
  return s;
}

void put_target(ByteWriter& w, const TargetDesc& t) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(t.kind));
  w.put_string(t.name);
  w.put_string(t.model);
  w.put_string(t.arch);
  w.put_string(t.cpu);
  w.put<std::uint64_t>(t.features.size());
  for (const auto& f : t.features) w.put_string(f);
  for (std::int64_t v : {std::int64_t(t.vector_bits), std::int64_t(t.vector_registers),
                         std::int64_t(t.fma_units), std::int64_t(t.fma_latency),
                         std::int64_t(t.cores), t.l1d_bytes, t.l2_bytes, t.l3_bytes,
                         std::int64_t(t.cache_line)})
    w.put<std::int64_t>(v);
  auto gpu = gpu_fields(t);
  w.put<std::uint64_t>(gpu.size());
  for (std::int64_t v : gpu) w.put<std::int64_t>(v);
}

TargetDesc get_target(ByteReader& r) {
  TargetDesc t;
  auto kind = r.get<std::uint8_t>("target kind");
  if (kind > 1) r.fail("unknown target kind " + std::to_string(kind));
  t.kind = static_cast<DeviceKind>(kind);
  t.name = r.get_string("target name");
  t.model = r.get_string("target model");
  t.arch = r.get_string("target arch");
  t.cpu = r.get_string("target cpu");
  auto n = r.count("target features", 8);
  for (std::uint64_t i = 0; i < n; ++i) t.features.push_back(r.get_string("target feature"));
  auto small = [&](const char* f) {
    auto v = r.get<std::int64_t>(f);
    if (v < 0 || v > (1 << 20)) r.fail(std::string(f) + " " + std::to_string(v) + " out of range");
    return static_cast<int>(v);
  };
  t.vector_bits = small("vector bits");
  t.vector_registers = small("vector registers");
  t.fma_units = small("fma units");
  t.fma_latency = small("fma latency");
  t.cores = small("cores");
  t.l1d_bytes = r.get<std::int64_t>("l1d");
  t.l2_bytes = r.get<std::int64_t>("l2");
  t.l3_bytes = r.get<std::int64_t>("l3");
  t.cache_line = small("cache line");
  auto n_gpu = r.count("gpu fields", 8);
  std::vector<std::int64_t> gpu;
  for (std::uint64_t i = 0; i < n_gpu; ++i) {
    auto v = r.get<std::int64_t>("gpu field");
    if (v < 0) r.fail("gpu field " + std::to_string(i) + " is negative");
    gpu.push_back(v);
  }
  set_gpu_fields(t, gpu);
  return t;
}

void put_ref(ByteWriter& w, const BufferRef& b) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(b.kind));
  w.put<std::uint32_t>(b.index);
  w.put<std::uint64_t>(b.offset);
  w.put<std::uint64_t>(b.bytes);
}

BufferRef get_ref(ByteReader& r) {
  BufferRef b;
  auto kind = r.get<std::uint8_t>("buffer kind");
  if (kind > 2) r.fail("unknown buffer kind " + std::to_string(kind));
  b.kind = static_cast<BufferRef::Kind>(kind);
  b.index = r.get<std::uint32_t>("buffer index");
  b.offset = r.get<std::uint64_t>("buffer offset");
  b.bytes = r.get<std::uint64_t>("buffer bytes");
  return b;
}

} // namespace

std::uint64_t bytes_of(const TensorSpec& s) { return static_cast<std::uint64_t>(numel(s.shape)) * size_of(s.dtype); }

std::uint64_t io_bytes(std::span<const TensorSpec> inputs, std::span<const TensorSpec> outputs,
                       std::span<const int> aliases) {
  std::uint64_t bytes = 0;
  for (const TensorSpec& s : inputs) bytes += bytes_of(s);
  for (std::size_t o = 0; o < outputs.size(); ++o)
    if (o >= aliases.size() || aliases[o] < 0) bytes += bytes_of(outputs[o]);
  return bytes;
}

std::string compiler_version() { return "nova 0.2.0 (format " + std::to_string(executable_format_version) + ")"; }

std::vector<std::uint8_t> ExecutableDesc::serialize() const {
  ByteWriter body;
  body.put_string(compiler_version);
  body.put<std::uint64_t>(key[0]);
  body.put<std::uint64_t>(key[1]);
  put_target(body, target);
  body.put<std::uint64_t>(inputs.size());
  for (const auto& s : inputs) put_spec(body, s);
  body.put<std::uint64_t>(outputs.size());
  for (const auto& s : outputs) put_spec(body, s);
  body.put<std::uint64_t>(aliases.size());
  for (int a : aliases) body.put<std::int32_t>(a);
  body.put<std::uint64_t>(arena_bytes);
  body.put<std::uint64_t>(kernels.size());
  for (const auto& k : kernels) {
    body.put_string(k.symbol);
    body.put_string(k.summary);
    body.put<std::uint64_t>(k.flops);
    body.put<std::uint64_t>(k.bytes);
    body.put<std::uint32_t>(k.threads);
    body.put<std::uint32_t>(k.shared_bytes);
    body.put<std::uint32_t>(k.cluster);
    body.put<std::uint64_t>(k.tensor_maps.size());
    for (const auto& m : k.tensor_maps) {
      body.put<std::uint32_t>(m.arg);
      body.put<std::uint8_t>(static_cast<std::uint8_t>(m.element));
      for (const auto* list : {&m.dims, &m.strides, &m.box}) {
        body.put<std::uint64_t>(list->size());
        for (std::uint64_t v : *list) body.put<std::uint64_t>(v);
      }
      body.put<std::uint32_t>(m.swizzle_bytes);
    }
  }
  body.put<std::uint64_t>(launches.size());
  for (const auto& l : launches) {
    body.put<std::uint32_t>(l.kernel);
    body.put<std::uint64_t>(l.workgroups);
    body.put<std::uint64_t>(l.args.size());
    for (const auto& a : l.args) put_ref(body, a);
  }
  body.put<std::uint64_t>(collectives.size());
  for (const auto& c : collectives) {
    body.put<std::uint8_t>(static_cast<std::uint8_t>(c.kind));
    body.put<std::uint8_t>(static_cast<std::uint8_t>(c.dtype));
    body.put<std::uint32_t>(c.after_launch);
    body.put<std::uint32_t>(c.before_launch);
    body.put<std::uint64_t>(c.buffers.size());
    for (const auto& b : c.buffers) put_ref(body, b);
  }
  body.put_string(object_format);
  body.put_bytes(object);
  body.put_string(binary_format);
  body.put_bytes(binary);

  ByteWriter out;
  out.put_raw(kMagic, sizeof kMagic);
  out.put<std::uint32_t>(executable_format_version);
  out.put<std::uint64_t>(body.bytes().size());
  out.put_raw(body.bytes().data(), body.bytes().size());
  out.put<std::uint64_t>(XXH3_64bits(body.bytes().data(), body.bytes().size()));
  return std::move(out.bytes());
}

ExecutableDesc ExecutableDesc::deserialize(std::span<const std::uint8_t> bytes, const std::string& what) {
  ByteReader head(bytes, what);
  char magic[8];
  head.get_raw(magic, sizeof magic, "magic");
  if (!std::equal(magic, magic + 8, kMagic)) head.fail("not a Nova executable (bad magic)");
  auto version = head.get<std::uint32_t>("format version");
  if (version != executable_format_version)
    head.fail("format version " + std::to_string(version) + ", this runtime reads version " +
              std::to_string(executable_format_version));
  auto length = head.get<std::uint64_t>("body length");
  // Compared without adding to `length`: a length near 2^64 would wrap round to the bytes left.
  if (head.remaining() < 8 || length != head.remaining() - 8)
    head.fail("body length " + std::to_string(length) + " does not match the " +
              std::to_string(head.remaining()) + " bytes that follow (truncated or padded)");
  auto body_bytes = bytes.subspan(head.position(), length);
  std::uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= std::uint64_t(bytes[head.position() + length + i]) << (8 * i);
  if (XXH3_64bits(body_bytes.data(), body_bytes.size()) != stored) head.fail("checksum mismatch (corrupted)");

  ByteReader r(body_bytes, what);
  ExecutableDesc d;
  d.compiler_version = r.get_string("compiler version");
  d.key[0] = r.get<std::uint64_t>("key");
  d.key[1] = r.get<std::uint64_t>("key");
  d.target = get_target(r);
  for (auto n = r.count("inputs", 9); n > 0; --n) d.inputs.push_back(get_spec(r));
  for (auto n = r.count("outputs", 9); n > 0; --n) d.outputs.push_back(get_spec(r));
  for (auto n = r.count("aliases", 4); n > 0; --n) d.aliases.push_back(r.get<std::int32_t>("alias"));
  d.arena_bytes = r.get<std::uint64_t>("arena bytes");
  for (auto n = r.count("kernels", 32); n > 0; --n) {
    KernelDesc k;
    k.symbol = r.get_string("kernel symbol");
    k.summary = r.get_string("kernel summary");
    k.flops = r.get<std::uint64_t>("kernel flops");
    k.bytes = r.get<std::uint64_t>("kernel bytes");
    k.threads = r.get<std::uint32_t>("kernel threads");
    k.shared_bytes = r.get<std::uint32_t>("kernel shared bytes");
    k.cluster = r.get<std::uint32_t>("kernel cluster");
    for (auto n_maps = r.count("tensor maps", 12); n_maps > 0; --n_maps) {
      TensorMapDesc m;
      m.arg = r.get<std::uint32_t>("tensor map argument");
      auto element = r.get<std::uint8_t>("tensor map element");
      if (element > static_cast<std::uint8_t>(MapElement::f16)) r.fail("tensor map element " + std::to_string(element));
      m.element = static_cast<MapElement>(element);
      for (auto* list : {&m.dims, &m.strides, &m.box})
        for (auto v = r.count("tensor map extents", 8); v > 0; --v) list->push_back(r.get<std::uint64_t>("tensor map extent"));
      m.swizzle_bytes = r.get<std::uint32_t>("tensor map swizzle");
      k.tensor_maps.push_back(std::move(m));
    }
    d.kernels.push_back(std::move(k));
  }
  for (auto n = r.count("launches", 20); n > 0; --n) {
    LaunchDesc l;
    l.kernel = r.get<std::uint32_t>("launch kernel");
    l.workgroups = r.get<std::uint64_t>("launch workgroups");
    for (auto a = r.count("launch arguments", 21); a > 0; --a) l.args.push_back(get_ref(r));
    d.launches.push_back(std::move(l));
  }
  for (auto n = r.count("collectives", 17); n > 0; --n) {
    CollectiveDesc c;
    auto kind = r.get<std::uint8_t>("collective kind");
    if (kind != 0) r.fail("unknown collective kind " + std::to_string(kind));
    auto dtype = r.get<std::uint8_t>("collective dtype");
    if (dtype != static_cast<std::uint8_t>(DType::f32) && dtype != static_cast<std::uint8_t>(DType::f64))
      r.fail("collective dtype " + std::to_string(dtype) + " is not f32 or f64");
    c.dtype = static_cast<DType>(dtype);
    c.after_launch = r.get<std::uint32_t>("collective start");
    c.before_launch = r.get<std::uint32_t>("collective end");
    for (auto b = r.count("collective buffers", 21); b > 0; --b) c.buffers.push_back(get_ref(r));
    d.collectives.push_back(std::move(c));
  }
  d.object_format = r.get_string("object format");
  d.object = r.get_bytes("object code");
  d.binary_format = r.get_string("binary format");
  d.binary = r.get_bytes("binary code");
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " unread bytes after the binary code");
  d.validate(what);
  return d;
}

void ExecutableDesc::validate(const std::string& what) const {
  auto fail = [&](const std::string& why) { throw FormatError(what + ": " + why); };
  if (aliases.size() != outputs.size())
    fail(std::to_string(aliases.size()) + " aliases for " + std::to_string(outputs.size()) + " outputs");
  for (std::size_t i = 0; i < aliases.size(); ++i) {
    int a = aliases[i];
    if (a < -1 || a >= static_cast<int>(inputs.size()))
      fail("output " + std::to_string(i) + " aliases input " + std::to_string(a) + " of " +
           std::to_string(inputs.size()));
    if (a >= 0 && !(inputs[static_cast<std::size_t>(a)] == outputs[i]))
      fail("output " + std::to_string(i) + " aliases an input of another type");
  }
  auto check_ref = [&](const BufferRef& b, const std::string& where) {
    switch (b.kind) {
    case BufferRef::Kind::input:
      if (b.index >= inputs.size()) fail(where + " reads input " + std::to_string(b.index) + " of " + std::to_string(inputs.size()));
      if (b.offset != 0 || b.bytes > bytes_of(inputs[b.index])) fail(where + " passes the end of input " + std::to_string(b.index));
      break;
    case BufferRef::Kind::output:
      if (b.index >= outputs.size()) fail(where + " writes output " + std::to_string(b.index) + " of " + std::to_string(outputs.size()));
      if (aliases[b.index] >= 0) fail(where + " writes aliased output " + std::to_string(b.index) + " (it lives in its input)");
      if (b.offset != 0 || b.bytes > bytes_of(outputs[b.index])) fail(where + " passes the end of output " + std::to_string(b.index));
      break;
    case BufferRef::Kind::arena:
      if (b.offset > arena_bytes || b.bytes > arena_bytes - b.offset)
        fail(where + " passes the end of the " + std::to_string(arena_bytes) + "-byte arena");
      break;
    }
  };
  for (const auto& k : kernels) {
    if (k.symbol.empty()) fail("a kernel has no symbol");
    bool gpu = target.kind != DeviceKind::cpu;
    if (gpu ? k.threads < 1 || k.threads > 1024 : k.threads != 0 || k.shared_bytes != 0)
      fail("kernel " + k.symbol + " has " + std::to_string(k.threads) + " threads a block on a " +
           (gpu ? "GPU (1 to 1024)" : "CPU (none)"));
    if (gpu ? k.cluster < 1 || k.cluster > 8 : k.cluster != 1)
      fail("kernel " + k.symbol + " runs in clusters of " + std::to_string(k.cluster) + " on a " +
           (gpu ? "GPU (1 to 8)" : "CPU (1)"));
  }
  for (const auto& k : kernels)
    for (const auto& m : k.tensor_maps) {
      // What cuTensorMapEncodeTiled accepts, so that a bad description is
      // refused here rather than by the driver (or by a TMA fault).
      std::string where = "kernel " + k.symbol + "'s tensor map of argument " + std::to_string(m.arg);
      if (target.kind == DeviceKind::cpu) fail(where + " on a CPU");
      std::string problem = detail::tensor_map_problem(m.dims, m.strides, m.box, size_of(m.element), m.swizzle_bytes);
      if (!problem.empty()) fail(where + ": " + problem);
    }
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const auto& l = launches[i];
    std::string where = "launch " + std::to_string(i);
    if (l.kernel >= kernels.size()) fail(where + " names kernel " + std::to_string(l.kernel) + " of " + std::to_string(kernels.size()));
    if (l.workgroups == 0) fail(where + " has no workgroups");
    if (l.kernel < kernels.size() && l.workgroups % kernels[l.kernel].cluster != 0)
      fail(where + "'s " + std::to_string(l.workgroups) + " workgroups are not whole clusters of " +
           std::to_string(kernels[l.kernel].cluster));
    if (l.args.size() > 4096) fail(where + " has " + std::to_string(l.args.size()) + " arguments");
    for (const auto& a : l.args) check_ref(a, where);
    // A tensor map reads no byte past its argument's buffer.
    for (const auto& m : kernels[l.kernel].tensor_maps) {
      if (m.arg >= l.args.size()) fail(where + " has no argument " + std::to_string(m.arg) + " for its tensor map");
      unsigned __int128 extent = m.dims[0] * size_of(m.element); // < 2^36; each term < 2^72
      for (std::size_t d = 1; d < m.dims.size(); ++d)
        extent += static_cast<unsigned __int128>(m.dims[d] - 1) * m.strides[d - 1];
      if (extent > l.args[m.arg].bytes)
        fail(where + "'s tensor map spans more than the " + std::to_string(l.args[m.arg].bytes) +
             " bytes of its argument");
    }
  }
  for (std::size_t i = 0; i < collectives.size(); ++i) {
    const auto& c = collectives[i];
    std::string where = "collective " + std::to_string(i);
    if (c.after_launch > launches.size() || c.before_launch > launches.size() || c.after_launch > c.before_launch)
      fail(where + " is placed outside the plan");
    for (const auto& b : c.buffers) {
      check_ref(b, where);
      if (b.bytes % size_of(c.dtype) != 0)
        fail(where + " sums " + std::to_string(b.bytes) + " bytes, not a whole number of " + std::string(name_of(c.dtype)));
    }
  }
  if (!launches.empty() && object.empty()) fail("launches but no object code");
  if (binary_format.empty() != binary.empty())
    fail(binary_format.empty() ? "binary code without a binary format" : "binary format '" + binary_format + "' without binary code");
  if (!binary_format.empty()) {
    if (binary_format != "cubin") fail("unknown binary format '" + binary_format + "'");
    if (object_format != "ptx") fail("a cubin beside a '" + object_format + "' object (cubins are assembled from PTX)");
    // An ELF for NVIDIA's EM_CUDA (190), little-endian 64-bit.
    constexpr std::uint8_t kElf[] = {0x7f, 'E', 'L', 'F', 2, 1};
    if (binary.size() < 64 || !std::equal(std::begin(kElf), std::end(kElf), binary.begin()) || binary[18] != 190 ||
        binary[19] != 0)
      fail("its cubin is not a 64-bit ELF for the CUDA architecture");
  }
}

void write_executable_file(const std::string& path, const ExecutableDesc& desc) {
  std::vector<std::uint8_t> bytes = desc.serialize();
  detail::AtomicFileWriter out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

ExecutableDesc read_executable_file(const std::string& path) {
  detail::InputFile in(path);
  if (in.size() > (std::uint64_t{1} << 34)) throw FormatError(path + ": " + std::to_string(in.size()) + " bytes is too large for an executable");
  std::vector<std::uint8_t> bytes(in.size());
  in.read_at(0, bytes.data(), bytes.size());
  return ExecutableDesc::deserialize(bytes, path);
}

} // namespace nova
