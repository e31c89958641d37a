#pragma once
/// \file
/// The safetensors header as the project's Python reference writer lays it out, without
/// LibTorch: compact JSON, ensure_ascii strings, `__metadata__` last, padded to 8 bytes.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "tracetorch/detail/safetensors/format.hpp"
#include "tracetorch/detail/text/json_text.hpp"

namespace tracetorch::detail {

/// Appends `"name":{"dtype":"F32","shape":[2,7],"data_offsets":[begin,end]}`; false when
/// `name` is not well-formed UTF-8 (the format's JSON must be, so the caller refuses it).
inline bool append_safetensors_entry(std::string& json, std::string_view name, const SafetensorsDtype& dtype,
                                     std::span<const std::int64_t> shape, std::uint64_t begin, std::uint64_t end) {
  const bool well_formed = append_json_string(json, name);
  json += ":{\"dtype\":\"";
  json += dtype.name;
  json += "\",\"shape\":[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d != 0) json += ',';
    json += std::to_string(shape[d]);
  }
  json += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  return well_formed;
}

/// Appends the `"__metadata__"` entry (nothing when `metadata` is empty), after a ',' when
/// tensor entries precede it. Returns the first key whose key or value is not well-formed
/// UTF-8, or nullptr.
inline const std::string* append_safetensors_metadata(std::string& json, const std::map<std::string, std::string>& metadata,
                                                      bool after_tensors) {
  if (metadata.empty()) return nullptr;
  json += after_tensors ? ",\"__metadata__\":{" : "\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    if (!first) json += ',';
    first = false;
    const bool valid_key = append_json_string(json, key);
    json += ':';
    if (!valid_key || !append_json_string(json, value)) return &key;
  }
  json += '}';
  return nullptr;
}

/// Closes the header object and pads it with spaces to a multiple of 8 bytes.
inline void finish_safetensors_header(std::string& json) {
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
}

/// The 8-byte little-endian length that precedes the header.
inline std::array<unsigned char, 8> safetensors_length_prefix(std::uint64_t length) {
  std::array<unsigned char, 8> bytes{};
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<unsigned char>(length >> (8 * i));
  return bytes;
}

}  // namespace tracetorch::detail
