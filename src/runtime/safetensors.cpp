// safetensors.cpp - the .safetensors writer and its validating reader.
//
// Writing: the header is built with nlohmann::ordered_json so tensors appear
// in the caller's order (after "__metadata__"), dumped compactly, and padded
// with spaces to a multiple of 8 bytes, as the reference implementation does,
// so the data section starts 8-byte aligned. Data follows in the same order.
//
// Reading: header length, JSON (duplicate keys are rejected while parsing,
// since a JSON object would silently keep only one), every entry, then the
// offsets, sorted, must tile the data section exactly. Only then are tensors
// allocated, so no allocation exceeds what the file itself holds.
#include "nova/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "file_io.hpp"

namespace nova {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

// Ordered, so tensors keep the header's order where data order ties.
using json = nlohmann::ordered_json;

/// The reference implementation's limit, which also bounds what we allocate.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

std::string_view safetensors_name(DType dtype) {
  switch (dtype) {
  case DType::f32: return "F32";
  case DType::f64: return "F64";
  case DType::i32: return "I32";
  case DType::i64: return "I64";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64})
    if (safetensors_name(d) == name) return d;
  return std::nullopt;
}

/// One validated header entry.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

/// Throws the FormatError of `path`.
[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw FormatError("nova::load_safetensors: " + path + ": " + problem);
}

std::string in_quotes(const std::string& name) { return "'" + name + "'"; }

/// "[begin, end)". Built with append: GCC 12 warns falsely (-Wrestrict) on a
/// chain of operator+ here.
std::string byte_range(std::uint64_t begin, std::uint64_t end) {
  std::string out = "[";
  out.append(std::to_string(begin)).append(", ").append(std::to_string(end)).append(")");
  return out;
}

/// Parses the header text, rejecting duplicate keys in any object.
json parse_header(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::string current_tensor;
  auto on_event = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      bool top = open_objects.size() == 1;
      if (top) current_tensor = key;
      if (!open_objects.back().insert(key).second) {
        if (top) fail(path, "the header names " + in_quotes(key) + " twice");
        fail(path, "the header's entry for " + in_quotes(current_tensor) + " has the key " +
                       in_quotes(key) + " twice");
      }
    }
    return true;
  };
  try {
    return json::parse(text, on_event);
  } catch (const json::exception& e) {
    fail(path, std::string("the header is not valid JSON: ") + e.what());
  }
}

/// A non-negative JSON integer, or nullopt.
std::optional<std::uint64_t> as_count(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  return std::nullopt;
}

Entry parse_entry(const std::string& path, const std::string& name, const json& value,
                  std::uint64_t data_bytes) {
  const std::string who = "tensor " + in_quotes(name);
  if (!value.is_object()) fail(path, who + ": the entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) fail(path, who + ": the entry has no \"" + key + "\"");

  Entry entry{name, DType::f32, {}, 0, 0};
  const json& dtype = value["dtype"];
  if (!dtype.is_string()) fail(path, who + ": \"dtype\" is not a string");
  auto parsed = parse_dtype(dtype.get<std::string>());
  if (!parsed)
    fail(path, who + ": unsupported dtype " + in_quotes(dtype.get<std::string>()) +
                   " (Nova reads F32, F64, I32 and I64)");
  entry.dtype = *parsed;

  // Each extent must be an integer >= 0, and the product of the non-zero
  // extents times the element size must fit in an int64, so that no shape
  // computation anywhere (numel, strides, byte sizes) can overflow.
  const json& shape = value["shape"];
  if (!shape.is_array()) fail(path, who + ": \"shape\" is not an array");
  const auto max_bytes = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t bytes = size_of(entry.dtype);
  bool empty = false;
  for (const json& extent : shape) {
    auto n = as_count(extent);
    if (!n || *n > max_bytes)
      fail(path, who + ": shape entry " + extent.dump() + " is not a non-negative integer");
    entry.shape.push_back(static_cast<std::int64_t>(*n));
    if (*n == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(bytes, *n, &bytes) || bytes > max_bytes)
      fail(path, who + ": shape " + shape.dump() + " overflows the byte count");
  }
  if (empty) bytes = 0;

  const json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !as_count(offsets[0]) || !as_count(offsets[1]))
    fail(path, who + ": \"data_offsets\" " + offsets.dump() +
                   " is not a pair of non-negative integers");
  entry.begin = *as_count(offsets[0]);
  entry.end = *as_count(offsets[1]);
  if (entry.begin > entry.end)
    fail(path, who + ": data_offsets " + offsets.dump() + " begin after they end");
  if (entry.end > data_bytes)
    fail(path, who + ": data_offsets " + offsets.dump() + " reach past the data section (" +
                   std::to_string(data_bytes) + " bytes)");
  if (entry.end - entry.begin != bytes)
    fail(path, who + ": " + std::string(safetensors_name(entry.dtype)) + to_string(entry.shape) +
                   " needs " + std::to_string(bytes) + " bytes but data_offsets " + offsets.dump() +
                   " hold " + std::to_string(entry.end - entry.begin));
  return entry;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& value) {
  if (!value.is_object()) fail(path, "\"__metadata__\" is not a JSON object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail(path, "\"__metadata__\" value of " + in_quotes(key) + " is not a string");
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

/// Calls f(byte offset of the element in `t`'s storage view) row-major.
template <class F> void for_each_element(const Tensor& t, F&& f) {
  std::int64_t n = t.numel();
  std::vector<std::int64_t> index(t.shape().size(), 0);
  const auto elem = static_cast<std::int64_t>(size_of(t.dtype()));
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < index.size(); ++d) off += index[d] * t.strides()[d];
    f(off * elem);
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
}

/// Copies the row-major contents of `src` into `dst` (same spec), which may
/// be a strided view: loading a checkpoint must update tensors in place.
void copy_into(const Tensor& src, Tensor& dst) {
  const std::size_t bytes = static_cast<std::size_t>(src.numel()) * size_of(src.dtype());
  if (bytes == 0) return;
  const auto* from = static_cast<const std::byte*>(src.raw_data());
  if (dst.is_contiguous()) {
    std::memcpy(dst.raw_data(), from, bytes);
    return;
  }
  auto* base = static_cast<std::byte*>(dst.raw_data());
  const std::size_t elem = size_of(dst.dtype());
  for_each_element(dst, [&](std::int64_t off) {
    std::memcpy(base + off, from, elem);
    from += elem;
  });
}

} // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string where = "nova::save_safetensors: " + path + ": ";
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) throw Error(where + "\"__metadata__\" is reserved, not a tensor name");
    if (!names.insert(name).second) throw Error(where + "the tensor name " + in_quotes(name) + " is used twice");
    if (!tensor.defined()) throw Error(where + "tensor " + in_quotes(name) + " is undefined");
  }

  json header = json::object();
  if (!metadata.empty()) {
    auto& meta = header[kMetadataKey] = json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    std::uint64_t bytes = static_cast<std::uint64_t>(tensor.numel()) * size_of(tensor.dtype());
    json entry = json::object();
    entry["dtype"] = safetensors_name(tensor.dtype());
    entry["shape"] = tensor.shape();
    entry["data_offsets"] = json::array({offset, offset + bytes});
    header[name] = std::move(entry);
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw Error(where + "a tensor name or metadata string is not valid UTF-8 (" + e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(text.size() >> (8 * i));

  detail::AtomicFileWriter out(path);
  out.write(length, sizeof length);
  out.write(text.data(), text.size());
  for (const auto& [name, tensor] : tensors) {
    std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * size_of(tensor.dtype());
    if (bytes == 0) continue;
    Tensor row_major = tensor.contiguous();
    out.write(row_major.raw_data(), bytes);
  }
  out.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  detail::InputFile in(path);
  const std::uint64_t file_bytes = in.size();
  if (file_bytes < 8)
    fail(path, "the file has " + std::to_string(file_bytes) +
                   " bytes, fewer than the 8-byte header length that starts every safetensors file");

  unsigned char length[8];
  in.read_at(0, length, sizeof length);
  std::uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= std::uint64_t{length[i]} << (8 * i);
  if (header_bytes > kMaxHeaderBytes)
    fail(path, "the header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  if (header_bytes > file_bytes - 8)
    fail(path, "the header length " + std::to_string(header_bytes) + " exceeds the " +
                   std::to_string(file_bytes - 8) + " bytes that follow it");
  const std::uint64_t data_bytes = file_bytes - 8 - header_bytes;

  std::string text(header_bytes, '\0');
  in.read_at(8, text.data(), text.size());
  json header = parse_header(path, text);
  if (!header.is_object()) fail(path, "the header is JSON but not an object");

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey)
      file.metadata = parse_metadata(path, value);
    else
      entries.push_back(parse_entry(path, name, value, data_bytes));
  }

  // The data section must be tiled exactly: no overlap, no hole, no tail.
  // Zero-size tensors may share an offset; they keep their header order.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      fail(path, "the data of tensors " + in_quotes(previous->name) + " " +
                     byte_range(previous->begin, previous->end) + " and " + in_quotes(e.name) +
                     " " + byte_range(e.begin, e.end) + " overlap");
    if (e.begin > covered)
      fail(path, "bytes " + byte_range(covered, e.begin) + " of the data section belong to no tensor");
    covered = e.end;
    previous = &e;
  }
  if (covered != data_bytes)
    fail(path, "bytes " + byte_range(covered, data_bytes) + " of the data section belong to no tensor");

  const std::uint64_t data_start = 8 + header_bytes;
  file.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin)
      in.read_at(data_start + e.begin, t.raw_data(), static_cast<std::size_t>(e.end - e.begin));
    file.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return file;
}

void save(const Params& params, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    tensors.emplace_back(params.names()[i], params.tensors()[i]);
  save_safetensors(path, tensors, metadata);
}

void load(Params& params, const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  std::map<std::string_view, const Tensor*> by_name;
  for (const auto& [name, tensor] : file.tensors) by_name[name] = &tensor;

  // Check every parameter first, so a bad checkpoint changes nothing.
  std::vector<const Tensor*> sources;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params.names()[i];
    const Tensor& target = params.tensors()[i];
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw FormatError("nova::load: " + path + " has no tensor for the parameter " + in_quotes(name));
    if (it->second->spec() != target.spec())
      throw FormatError("nova::load: " + path + ": the parameter " + in_quotes(name) + " is " +
                        to_string(target.spec()) + " but the file holds " +
                        to_string(it->second->spec()));
    sources.push_back(it->second);
  }
  for (std::size_t i = 0; i < params.size(); ++i) copy_into(*sources[i], params.tensors()[i]);
}

} // namespace nova
