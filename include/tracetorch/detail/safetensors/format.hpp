#pragma once
/// \file
/// The safetensors format without LibTorch: its dtype names, and the parsing and validation of
/// a header (JSON, shapes, offsets) from plain bytes, so that it can be fuzzed on its own.
//
// A file is a u64 little-endian header length N, N bytes of JSON header
// (`{"name": {"dtype": "F32", "shape": [2, 7], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "value"}}`, offsets relative to the data), then the raw data.

#include <boost/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/text/json_unique_keys.hpp"
#include "tracetorch/detail/text/message_text.hpp"

namespace tracetorch::detail {

/// The reference loader refuses longer headers; so does this one (it bounds the allocation).
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;

/// A dtype as the header names it, and the bytes of one element.
struct SafetensorsDtype {
  std::string_view name;
  std::uint64_t size;
};

/// The dtypes tracetorch reads and writes: those with a LibTorch equivalent
/// (safetensors_torch.hpp maps them, in this order).
inline constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},
    {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"C64", 8},
};

/// Dtypes of the format that LibTorch 1.13 lacks: refused with a message saying so.
inline constexpr std::string_view kSafetensorsDtypesWithoutLibTorch[] = {"U16", "U32", "U64", "F8_E4M3", "F8_E5M2"};

inline const SafetensorsDtype* safetensors_dtype(std::string_view name) {
  for (const auto& d : kSafetensorsDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

/// One tensor's header entry, its dtype in `Dtype`'s terms (`kNoDtype` until one is read): the
/// format's own here (SafetensorsEntry), LibTorch's in the public safetensors::TensorInfo.
template <class Dtype, Dtype kNoDtype>
struct BasicTensorInfo {
  std::string name;
  Dtype dtype = kNoDtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< data_offsets[0], relative to the header's data_start
  std::uint64_t end = 0;    ///< data_offsets[1]
};

/// A validated header of `Info` entries (ParsedSafetensorsHeader here, safetensors::Header public).
template <class Info>
struct BasicHeader {
  std::vector<Info> tensors;  ///< in data-offset order
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  ///< 8 + header length: where data offset 0 lies in the file
  std::uint64_t file_size = 0;
};

/// An entry in the format's own terms: its dtype points into kSafetensorsDtypes.
using SafetensorsEntry = BasicTensorInfo<const SafetensorsDtype*, nullptr>;
/// A validated header, before dtypes become LibTorch's.
using ParsedSafetensorsHeader = BasicHeader<SafetensorsEntry>;

/// The checks of one header's JSON, each failing with "tracetorch: <file>: <cause>".
class SafetensorsHeaderParser {
 public:
  explicit SafetensorsHeaderParser(std::string_view file) : file_(file) {}

  [[noreturn]] void fail(const std::string& cause) const {
    throw Error("tracetorch: " + std::string(file_) + ": " + cause);
  }
  [[noreturn]] void fail(const std::string& tensor, const std::string& cause) const {
    fail("tensor " + quoted_for_message(tensor) + ": " + cause);
  }

  boost::json::value parse_json(std::string_view text) const {
    JsonProblem problem;
    auto value = parse_json_unique_keys(text, problem);
    if (problem.duplicate_key) fail("header has duplicate key " + quoted_for_message(*problem.duplicate_key));
    if (!value) fail("header is not valid JSON: " + problem.error);
    return std::move(*value);
  }

  /// An entry's fields in the order the checks run: dtype, shape, then data_offsets.
  SafetensorsEntry entry(const std::string& name, const boost::json::value& value) const {
    const auto* object = value.if_object();
    if (object == nullptr) fail(name, "entry is " + json_for_message(value) + ", not an object");
    SafetensorsEntry info;
    info.name = name;
    info.dtype = dtype(*object, name);
    const std::uint64_t elements = shape(*object, info);
    offsets(*object, info, elements);
    return info;
  }

  std::map<std::string, std::string> metadata(const boost::json::value& value) const {
    std::map<std::string, std::string> out;
    if (value.is_null()) return out;  // the safetensors loader reads null as "no metadata"
    const auto* object = value.if_object();
    if (object == nullptr) fail("\"__metadata__\" is " + json_for_message(value) + ", not an object of strings");
    for (const auto& [key, item] : *object) {
      const auto* text = item.if_string();
      if (text == nullptr) {
        fail("\"__metadata__\" value for " + quoted_for_message(key) + " is " + json_for_message(item) +
             ", not a string");
      }
      out.emplace(std::string(key), std::string(*text));
    }
    return out;
  }

  static std::string offsets_for_message(const SafetensorsEntry& info) {
    return "[" + std::to_string(info.begin) + ", " + std::to_string(info.end) + "]";
  }

 private:
  std::uint64_t unsigned_integer(const boost::json::value& v, const std::string& tensor, const char* what) const {
    if (const auto* u = v.if_uint64()) return *u;
    if (const auto* i = v.if_int64(); i && *i >= 0) return static_cast<std::uint64_t>(*i);
    fail(tensor, std::string(what) + " is " + json_for_message(v) + ", not a non-negative integer");
  }

  const boost::json::value& field(const boost::json::object& entry, const std::string& tensor, const char* key) const {
    const auto* value = entry.if_contains(key);
    if (value == nullptr) fail(tensor, std::string("entry has no \"") + key + "\"");
    return *value;
  }

  const SafetensorsDtype* dtype(const boost::json::object& object, const std::string& name) const {
    const auto& dtype_value = field(object, name, "dtype");
    const auto* dtype_name = dtype_value.if_string();
    if (dtype_name == nullptr) fail(name, "\"dtype\" is " + json_for_message(dtype_value) + ", not a string");
    const auto* found = safetensors_dtype(std::string_view(*dtype_name));
    if (found == nullptr) {
      const bool known = std::find(std::begin(kSafetensorsDtypesWithoutLibTorch), std::end(kSafetensorsDtypesWithoutLibTorch),
                                   std::string_view(*dtype_name)) != std::end(kSafetensorsDtypesWithoutLibTorch);
      fail(name, (known ? "dtype " + std::string(*dtype_name) + " has no LibTorch equivalent"
                        : "unknown dtype " + quoted_for_message(*dtype_name)));
    }
    return found;
  }

  /// Reads info.shape; returns its element count.
  std::uint64_t shape(const boost::json::object& object, SafetensorsEntry& info) const {
    const auto& shape_value = field(object, info.name, "shape");
    const auto* shape = shape_value.if_array();
    if (shape == nullptr) fail(info.name, "\"shape\" is " + json_for_message(shape_value) + ", not an array");
    // The product of the nonzero dims also bounds the strides LibTorch computes, so it must
    // fit in int64 even where a zero dim makes the element count 0.
    constexpr auto kMaxProduct = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t nonzero_product = 1;
    bool has_zero = false, overflow = false;
    for (std::size_t i = 0; i < shape->size(); ++i) {
      const std::string what = "shape[" + std::to_string(i) + "]";
      const std::uint64_t dim = unsigned_integer((*shape)[i], info.name, what.c_str());
      info.shape.push_back(static_cast<std::int64_t>(dim));  // wraps only where overflow is set
      if (dim == 0) {
        has_zero = true;
      } else if (overflow || dim > kMaxProduct / nonzero_product) {
        overflow = true;
      } else {
        nonzero_product *= dim;
      }
    }
    if (overflow || nonzero_product > kMaxProduct / info.dtype->size) {
      std::vector<std::uint64_t> dims;
      for (const auto& dim : *shape) dims.push_back(dim.to_number<std::uint64_t>());
      fail(info.name, "shape " + shape_for_message(dims) + " has too many elements (its byte size overflows int64)");
    }
    return has_zero ? 0 : nonzero_product;
  }

  void offsets(const boost::json::object& object, SafetensorsEntry& info, std::uint64_t elements) const {
    const auto& name = info.name;
    const auto& offsets_value = field(object, name, "data_offsets");
    const auto* offsets = offsets_value.if_array();
    if (offsets == nullptr || offsets->size() != 2) {
      fail(name, "\"data_offsets\" is " + json_for_message(offsets_value) + ", not [begin, end]");
    }
    info.begin = unsigned_integer((*offsets)[0], name, "data_offsets[0]");
    info.end = unsigned_integer((*offsets)[1], name, "data_offsets[1]");
    if (info.end < info.begin) fail(name, "data_offsets " + offsets_for_message(info) + " end before they begin");
    // Checked here, where the element count is at hand; the order checks come later.
    const std::uint64_t needed = elements * info.dtype->size;
    if (info.end - info.begin != needed) {
      fail(name, "data_offsets " + offsets_for_message(info) + " hold " + std::to_string(info.end - info.begin) +
                     " bytes but shape " + shape_for_message(info.shape) + " of " + std::string(info.dtype->name) +
                     " needs " + std::to_string(needed));
    }
  }

  std::string_view file_;
};

inline std::uint64_t read_u64_le(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

/// The header length, checked against the limit and the file size.
inline std::uint64_t safetensors_header_length(std::span<const unsigned char> bytes, std::uint64_t file_size,
                                               std::string_view file) {
  const SafetensorsHeaderParser parser(file);
  if (file_size < 8) {
    parser.fail("file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  }
  if (bytes.size() < 8) parser.fail("parse_header needs the file's first 8 bytes");
  const std::uint64_t length = read_u64_le(bytes.data());
  if (length > kSafetensorsMaxHeader) {
    parser.fail("header length " + std::to_string(length) + " exceeds the limit of " +
                std::to_string(kSafetensorsMaxHeader) + " bytes");
  }
  if (length > file_size - 8) {
    parser.fail("header length " + std::to_string(length) + " runs past the end of the file (" +
                std::to_string(file_size) + " bytes)");
  }
  return length;
}

/// Like the reference loader: sorted in data order, the tensors must tile the data exactly.
inline void check_safetensors_tiling(ParsedSafetensorsHeader& header, const SafetensorsHeaderParser& parser) {
  std::sort(header.tensors.begin(), header.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  const std::uint64_t data_size = header.file_size - header.data_start;
  std::uint64_t expected = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& info : header.tensors) {
    const std::string offsets = "data_offsets " + SafetensorsHeaderParser::offsets_for_message(info);
    if (info.begin > expected) {
      parser.fail(info.name, offsets + " leave bytes " + std::to_string(expected) + ".." + std::to_string(info.begin) +
                                 " unused (tensor data must be contiguous from 0)");
    }
    if (info.begin < expected) {
      parser.fail(info.name, offsets + " overlap tensor " + quoted_for_message(previous->name) + ", which ends at " +
                                 std::to_string(expected));
    }
    if (info.end > data_size) {
      parser.fail(info.name, offsets + " run past the end of the data (" + std::to_string(data_size) + " bytes)");
    }
    expected = info.end;
    previous = &info;
  }
  if (expected != data_size) {
    parser.fail(std::to_string(data_size - expected) + " trailing bytes after the last tensor (data is " +
                std::to_string(data_size) + " bytes, tensors end at " + std::to_string(expected) + ")");
  }
}

/// Parses and validates a header from the first bytes of a file of `file_size` bytes (see
/// safetensors::parse_header, which this is without LibTorch's dtypes). Pure: reads nothing
/// but `bytes`. Throws Error("tracetorch: <file_name>: <cause>") on any violation.
inline ParsedSafetensorsHeader parse_safetensors_header(std::span<const unsigned char> bytes, std::uint64_t file_size,
                                                        std::string_view file_name) {
  const SafetensorsHeaderParser parser(file_name);
  const std::uint64_t length = safetensors_header_length(bytes, file_size, file_name);
  if (bytes.size() - 8 < length) {
    parser.fail("parse_header needs the file's first " + std::to_string(8 + length) + " bytes, got " +
                std::to_string(bytes.size()));
  }
  ParsedSafetensorsHeader header;
  header.data_start = 8 + length;
  header.file_size = file_size;
  const auto json = parser.parse_json({reinterpret_cast<const char*>(bytes.data()) + 8, length});
  const auto* object = json.if_object();
  if (object == nullptr) parser.fail("header is " + json_for_message(json) + ", not a JSON object");
  for (const auto& [key, value] : *object) {
    if (key == "__metadata__") {
      header.metadata = parser.metadata(value);
    } else {
      header.tensors.push_back(parser.entry(std::string(key), value));
    }
  }
  check_safetensors_tiling(header, parser);
  return header;
}

}  // namespace tracetorch::detail
