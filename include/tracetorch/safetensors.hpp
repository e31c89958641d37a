#pragma once
/// \file
/// Reading and writing `.safetensors` files: a u64 little-endian header length N, N bytes of
/// JSON header (`{"name": {"dtype": "F32", "shape": [2, 7], "data_offsets": [begin, end]}, ...,
/// "__metadata__": {"key": "value"}}`, offsets relative to the data), then the raw data.
///
/// \code
/// tracetorch::safetensors::save("x.safetensors", tensor);               // key "data"
/// auto x = tracetorch::safetensors::load_single("x.safetensors");
///
/// tracetorch::safetensors::Reader reader("model.safetensors");          // header only
/// for (const auto& info : reader.header().tensors) std::cout << info.name << "\n";
/// auto w = reader.load("norm.weight");                                  // reads that tensor only
/// \endcode
///
/// The writer produces the same bytes as the project's Python reference writer (keys sorted,
/// compact JSON with `ensure_ascii` escapes, `__metadata__` last, header padded with spaces to
/// a multiple of 8); several metadata entries come in key order, as a Python dict built in
/// that order gives. The reader validates like the safetensors loader and refuses anything
/// malformed with a tracetorch::Error naming the file and the cause. Where it differs: it
/// also refuses duplicate JSON keys (the safetensors loader keeps the last) and shapes whose
/// nonzero dims overflow int64 even when another dim is 0 (LibTorch's strides would); like
/// that loader it ignores unknown fields in an entry and reads `"__metadata__": null` as none.

#include <torch/torch.h>

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>  // basic_parser is a template: its definitions live here

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tracetorch/detail/io/atomic_file.hpp"
#include "tracetorch/detail/read_file.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch::safetensors {

/// Tensors to save, by name (any order: the file holds them sorted).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// One tensor's header entry.
struct TensorInfo {
  std::string name;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> shape;
  std::uint64_t begin = 0;  ///< data_offsets[0], relative to Header::data_start
  std::uint64_t end = 0;    ///< data_offsets[1]
};

/// A validated header.
struct Header {
  std::vector<TensorInfo> tensors;  ///< in data-offset order
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  ///< 8 + header length: where data offset 0 lies in the file
  std::uint64_t file_size = 0;
};

}  // namespace tracetorch::safetensors

namespace tracetorch::detail {

// The data is written and read as raw bytes in host order; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "tracetorch's safetensors I/O assumes a little-endian host");

/// The reference loader refuses longer headers; so does this one (it bounds the allocation).
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;

struct SafetensorsDtype {
  std::string_view name;
  c10::ScalarType type;
  std::uint64_t size;
};

inline constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    {"F64", c10::ScalarType::Double, 8},   {"F32", c10::ScalarType::Float, 4},
    {"F16", c10::ScalarType::Half, 2},     {"BF16", c10::ScalarType::BFloat16, 2},
    {"I64", c10::ScalarType::Long, 8},     {"I32", c10::ScalarType::Int, 4},
    {"I16", c10::ScalarType::Short, 2},    {"I8", c10::ScalarType::Char, 1},
    {"U8", c10::ScalarType::Byte, 1},      {"BOOL", c10::ScalarType::Bool, 1},
    {"C64", c10::ScalarType::ComplexFloat, 8},
};

inline const SafetensorsDtype* safetensors_dtype(std::string_view name) {
  for (const auto& d : kSafetensorsDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

inline const SafetensorsDtype* safetensors_dtype(c10::ScalarType type) {
  for (const auto& d : kSafetensorsDtypes) {
    if (d.type == type) return &d;
  }
  return nullptr;
}

/// A name or value as it appears in an error message: quoted, control bytes escaped, and cut
/// short, since hostile headers can hold megabyte-long or binary keys.
inline std::string quoted_for_message(std::string_view text) {
  constexpr std::size_t kMax = 200;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMax) out += "...";
  return out + "\"";
}

/// A JSON value for an error message, cut short like quoted_for_message.
inline std::string json_for_message(const boost::json::value& value) {
  std::string text = boost::json::serialize(value);
  if (text.size() > 80) text = text.substr(0, 80) + "...";
  return text;
}

template <class Int>
std::string shape_for_message(const std::vector<Int>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

/// Appends `utf8` as a JSON string the way Python's json.dumps does by default
/// (ensure_ascii): everything outside printable ASCII as a lowercase \uXXXX escape, surrogate
/// pairs above U+FFFF. Returns false, leaving `out` partly written, for invalid UTF-8.
inline bool append_ascii_json_string(std::string& out, std::string_view utf8) {
  static constexpr char hex[] = "0123456789abcdef";
  const auto u_escape = [&](std::uint32_t unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex[(unit >> shift) & 15];
  };
  out += '"';
  for (std::size_t i = 0; i < utf8.size();) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    std::uint32_t cp = 0;
    std::size_t length = 1;
    if (lead < 0x80) {
      cp = lead;
    } else {
      std::uint32_t min = 0;
      if ((lead & 0xe0) == 0xc0) {
        length = 2, cp = lead & 0x1f, min = 0x80;
      } else if ((lead & 0xf0) == 0xe0) {
        length = 3, cp = lead & 0x0f, min = 0x800;
      } else if ((lead & 0xf8) == 0xf0) {
        length = 4, cp = lead & 0x07, min = 0x10000;
      } else {
        return false;
      }
      if (utf8.size() - i < length) return false;
      for (std::size_t k = 1; k < length; ++k) {
        const auto c = static_cast<unsigned char>(utf8[i + k]);
        if ((c & 0xc0) != 0x80) return false;
        cp = (cp << 6) | (c & 0x3f);
      }
      // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not Unicode text.
      if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    }
    i += length;
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp >= 0x20 && cp < 0x7f) {
          out += static_cast<char>(cp);
        } else if (cp < 0x10000) {
          u_escape(cp);
        } else {
          u_escape(0xd800 + ((cp - 0x10000) >> 10));
          u_escape(0xdc00 + ((cp - 0x10000) & 0x3ff));
        }
    }
  }
  out += '"';
  return true;
}

/// Boost.JSON's parser keeps the last of duplicate keys; the header must not have any (two
/// entries for one tensor name are ambiguous). This handler builds the value as
/// boost::json::parser does and stops at the first key seen twice in one object.
class UniqueKeyJsonHandler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  boost::json::value_stack stack;
  std::optional<std::string> duplicate_key;

  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }
  bool on_object_begin(boost::json::error_code&) {
    keys_.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t n, boost::json::error_code&) {
    keys_.pop_back();
    stack.push_object(n);
    return true;
  }
  bool on_array_begin(boost::json::error_code&) { return true; }
  bool on_array_end(std::size_t n, boost::json::error_code&) {
    stack.push_array(n);
    return true;
  }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    stack.push_chars(s);
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(boost::json::string_view s, std::size_t, boost::json::error_code& ec) {
    stack.push_key(s);
    key_.append(s.data(), s.size());
    if (!keys_.back().insert(key_).second) {
      duplicate_key = std::move(key_);
      ec = boost::json::error::syntax;  // any error stops the parser; duplicate_key says which
      return false;
    }
    key_.clear();
    return true;
  }
  bool on_string_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    stack.push_chars(s);
    return true;
  }
  bool on_string(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    stack.push_string(s);
    return true;
  }
  bool on_number_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_int64(std::int64_t i, boost::json::string_view, boost::json::error_code&) {
    stack.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, boost::json::string_view, boost::json::error_code&) {
    stack.push_uint64(u);
    return true;
  }
  bool on_double(double d, boost::json::string_view, boost::json::error_code&) {
    stack.push_double(d);
    return true;
  }
  bool on_bool(bool b, boost::json::error_code&) {
    stack.push_bool(b);
    return true;
  }
  bool on_null(boost::json::error_code&) {
    stack.push_null();
    return true;
  }
  bool on_comment_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::json::error_code&) { return true; }

 private:
  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
  std::string key_;                                    // the key being assembled from parts
};

/// Why parse_json_unique_keys gave no value: a key seen twice in one object, or a syntax error.
struct JsonProblem {
  std::optional<std::string> duplicate_key;
  std::string error;  ///< Boost.JSON's message, where the text is not JSON
};

/// `text` as one JSON value, refusing a key seen twice in one object (Boost.JSON would keep the
/// last); nullopt, with `problem` saying why, otherwise. Shared by the safetensors header and
/// the checkpoint index (checkpoint.hpp).
inline std::optional<boost::json::value> parse_json_unique_keys(std::string_view text, JsonProblem& problem) {
  boost::json::basic_parser<UniqueKeyJsonHandler> parser(boost::json::parse_options{});
  parser.handler().stack.reset();
  boost::json::error_code ec;
  const std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
  if (const auto& key = parser.handler().duplicate_key) {
    problem.duplicate_key = *key;
    return std::nullopt;
  }
  if (!ec && used < text.size()) ec = boost::json::error::extra_data;
  if (ec) {
    problem.error = ec.message();
    return std::nullopt;
  }
  return parser.handler().stack.release();
}

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

  safetensors::TensorInfo entry(const std::string& name, const boost::json::value& value) const {
    const auto* object = value.if_object();
    if (object == nullptr) fail(name, "entry is " + json_for_message(value) + ", not an object");
    safetensors::TensorInfo info;
    info.name = name;

    const auto& dtype_value = field(*object, name, "dtype");
    const auto* dtype_name = dtype_value.if_string();
    if (dtype_name == nullptr) fail(name, "\"dtype\" is " + json_for_message(dtype_value) + ", not a string");
    const auto* dtype = safetensors_dtype(std::string_view(*dtype_name));
    if (dtype == nullptr) {
      static constexpr std::string_view no_libtorch_type[] = {"U16", "U32", "U64", "F8_E4M3", "F8_E5M2"};
      const bool known = std::find(std::begin(no_libtorch_type), std::end(no_libtorch_type),
                                   std::string_view(*dtype_name)) != std::end(no_libtorch_type);
      fail(name, (known ? "dtype " + std::string(*dtype_name) + " has no LibTorch equivalent"
                        : "unknown dtype " + quoted_for_message(*dtype_name)));
    }
    info.dtype = dtype->type;

    const auto& shape_value = field(*object, name, "shape");
    const auto* shape = shape_value.if_array();
    if (shape == nullptr) fail(name, "\"shape\" is " + json_for_message(shape_value) + ", not an array");
    // The product of the nonzero dims also bounds the strides LibTorch computes, so it must
    // fit in int64 even where a zero dim makes the element count 0.
    constexpr auto kMaxProduct = static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max());
    std::uint64_t nonzero_product = 1;
    bool has_zero = false, overflow = false;
    for (std::size_t i = 0; i < shape->size(); ++i) {
      const std::string what = "shape[" + std::to_string(i) + "]";
      const std::uint64_t dim = unsigned_integer((*shape)[i], name, what.c_str());
      info.shape.push_back(static_cast<int64_t>(dim));  // wraps only where overflow is set
      if (dim == 0) {
        has_zero = true;
      } else if (overflow || dim > kMaxProduct / nonzero_product) {
        overflow = true;
      } else {
        nonzero_product *= dim;
      }
    }
    if (overflow || nonzero_product > kMaxProduct / dtype->size) {
      std::vector<std::uint64_t> dims;
      for (const auto& dim : *shape) dims.push_back(dim.to_number<std::uint64_t>());
      fail(name, "shape " + shape_for_message(dims) + " has too many elements (its byte size overflows int64)");
    }
    const std::uint64_t elements = has_zero ? 0 : nonzero_product;

    const auto& offsets_value = field(*object, name, "data_offsets");
    const auto* offsets = offsets_value.if_array();
    if (offsets == nullptr || offsets->size() != 2) {
      fail(name, "\"data_offsets\" is " + json_for_message(offsets_value) + ", not [begin, end]");
    }
    info.begin = unsigned_integer((*offsets)[0], name, "data_offsets[0]");
    info.end = unsigned_integer((*offsets)[1], name, "data_offsets[1]");
    if (info.end < info.begin) fail(name, "data_offsets " + offsets_for_message(info) + " end before they begin");
    // Checked here, where the element count is at hand; the order checks come later.
    const std::uint64_t needed = elements * dtype->size;
    if (info.end - info.begin != needed) {
      fail(name, "data_offsets " + offsets_for_message(info) + " hold " + std::to_string(info.end - info.begin) +
                     " bytes but shape " + shape_for_message(info.shape) + " of " + std::string(dtype->name) +
                     " needs " + std::to_string(needed));
    }
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

  static std::string offsets_for_message(const safetensors::TensorInfo& info) {
    return "[" + std::to_string(info.begin) + ", " + std::to_string(info.end) + "]";
  }

 private:
  std::string_view file_;
};

/// An open file, closed on scope exit.
struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

/// Opens `path` for reading and returns it with its size: a regular file (read_file.hpp's
/// check, so a FIFO or device is refused before it is opened). No size limit here: the header
/// is at most kSafetensorsMaxHeader bytes and each tensor is read as the checked header says.
inline std::pair<UniqueFile, std::uint64_t> open_for_reading(const std::filesystem::path& path) {
  ReadableFile file = open_regular_file(path, std::numeric_limits<std::uint64_t>::max(), "a safetensors file");
  UniqueFile stream(::fdopen(file.fd(), "rb"));
  if (!stream) throw Error("tracetorch: " + path.string() + ": cannot open: " + std::strerror(errno));
  file.release();  // the stream owns it now
  return {std::move(stream), file.size()};
}

/// Reads exactly `size` bytes at `offset`; a short read means the file changed under us.
inline void read_exactly(std::FILE* file, const std::filesystem::path& path, std::uint64_t offset, void* out,
                         std::uint64_t size) {
  if (size == 0) return;
  if (offset > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) ||
      ::fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0) {
    throw Error("tracetorch: " + path.string() + ": cannot seek to byte " + std::to_string(offset) + ": " +
                std::strerror(errno));
  }
  if (std::fread(out, 1, size, file) != size) {
    const std::string why = std::ferror(file) ? std::strerror(errno) : "the file is shorter than its header says";
    throw Error("tracetorch: " + path.string() + ": cannot read " + std::to_string(size) + " bytes at byte " +
                std::to_string(offset) + ": " + why);
  }
}

[[noreturn]] inline void save_failed(const std::filesystem::path& path, const std::string& cause) {
  throw Error("tracetorch: cannot save " + path.string() + ": " + cause);
}

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

}  // namespace tracetorch::detail

namespace tracetorch::safetensors {

/// Parses and validates a header from the first bytes of a file of `file_size` bytes.
/// `bytes` must hold at least the 8-byte length and the header it announces (the whole file
/// will do). Pure: reads nothing else, so it suits a fuzzer. Everything the header and the
/// file size determine is checked: limits, JSON, fields, dtypes, shapes, offsets contiguous
/// from 0, sizes, and that the last tensor ends exactly at the end of the file.
/// Throws tracetorch::Error("tracetorch: <file_name>: <cause>") on any violation.
inline Header parse_header(std::span<const unsigned char> bytes, std::uint64_t file_size, std::string_view file_name) {
  const detail::SafetensorsHeaderParser parser(file_name);
  const std::uint64_t length = detail::safetensors_header_length(bytes, file_size, file_name);
  if (bytes.size() - 8 < length) {
    parser.fail("parse_header needs the file's first " + std::to_string(8 + length) + " bytes, got " +
                std::to_string(bytes.size()));
  }
  Header header;
  header.data_start = 8 + length;
  header.file_size = file_size;
  const std::uint64_t data_size = file_size - header.data_start;

  const auto json = parser.parse_json({reinterpret_cast<const char*>(bytes.data()) + 8, length});
  const auto* object = json.if_object();
  if (object == nullptr) parser.fail("header is " + detail::json_for_message(json) + ", not a JSON object");
  for (const auto& [key, value] : *object) {
    if (key == "__metadata__") {
      header.metadata = parser.metadata(value);
    } else {
      header.tensors.push_back(parser.entry(std::string(key), value));
    }
  }

  // Like the reference loader: in data order the tensors must tile the data exactly.
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t expected = 0;
  const TensorInfo* previous = nullptr;
  for (const auto& info : header.tensors) {
    const std::string offsets = "data_offsets " + detail::SafetensorsHeaderParser::offsets_for_message(info);
    if (info.begin > expected) {
      parser.fail(info.name, offsets + " leave bytes " + std::to_string(expected) + ".." + std::to_string(info.begin) +
                                 " unused (tensor data must be contiguous from 0)");
    }
    if (info.begin < expected) {
      parser.fail(info.name, offsets + " overlap tensor " + detail::quoted_for_message(previous->name) +
                                 ", which ends at " + std::to_string(expected));
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
  return header;
}

/// A safetensors file whose header has been read and validated; tensors are read one at a
/// time on request, so memory stays bounded by the largest tensor asked for. Each load()
/// reopens the file (load() is const and safe to call from several threads) and refuses to
/// read if the file's size changed since the header was parsed.
class Reader {
 public:
  explicit Reader(std::filesystem::path path) : path_(std::move(path)) {
    auto [file, size] = detail::open_for_reading(path_);
    unsigned char prefix[8] = {};
    const std::uint64_t available = std::min<std::uint64_t>(size, 8);
    detail::read_exactly(file.get(), path_, 0, prefix, available);
    const std::uint64_t length =
        detail::safetensors_header_length(std::span<const unsigned char>(prefix, available), size, path_.string());
    std::vector<unsigned char> bytes(8 + length);
    std::copy(prefix, prefix + 8, bytes.begin());
    detail::read_exactly(file.get(), path_, 8, bytes.data() + 8, length);
    header_ = parse_header(bytes, size, path_.string());
    for (std::size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
  }

  const std::filesystem::path& path() const { return path_; }
  const Header& header() const { return header_; }
  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }

  /// The header entry of `name`; throws Error naming the file and tensor if there is none.
  const TensorInfo& info(std::string_view name) const {
    const auto found = index_.find(name);
    if (found == index_.end()) {
      throw Error("tracetorch: " + path_.string() + ": no tensor " + detail::quoted_for_message(name));
    }
    return header_.tensors[found->second];
  }

  /// Reads one tensor (CPU, contiguous, its stored dtype).
  torch::Tensor load(std::string_view name) const {
    const auto& wanted = info(name);
    const auto file = open_unchanged();
    return read(file.get(), wanted);
  }

  /// Reads every tensor, through one open file.
  std::map<std::string, torch::Tensor> load_all() const {
    std::map<std::string, torch::Tensor> out;
    const auto file = open_unchanged();
    for (const auto& info : header_.tensors) out.emplace(info.name, read(file.get(), info));
    return out;
  }

 private:
  detail::UniqueFile open_unchanged() const {
    auto [file, size] = detail::open_for_reading(path_);
    if (size != header_.file_size) {
      throw Error("tracetorch: " + path_.string() + ": file changed since its header was read (" +
                  std::to_string(header_.file_size) + " bytes then, " + std::to_string(size) + " now)");
    }
    return std::move(file);
  }

  torch::Tensor read(std::FILE* file, const TensorInfo& info) const {
    // BOOL is read as bytes and compared with 0: a stored byte other than 0/1 must not become
    // an invalid bool (the reference loader does the same via .to(torch.bool)).
    const bool is_bool = info.dtype == c10::ScalarType::Bool;
    auto tensor = torch::empty(info.shape, torch::TensorOptions().dtype(is_bool ? c10::ScalarType::Byte : info.dtype));
    if (info.end != info.begin) {
      detail::read_exactly(file, path_, header_.data_start + info.begin, tensor.data_ptr(), info.end - info.begin);
    }
    return is_bool ? tensor.ne(0) : tensor;
  }

  std::filesystem::path path_;
  Header header_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

/// Every tensor in the file, by name.
inline std::map<std::string, torch::Tensor> load(const std::filesystem::path& path) { return Reader(path).load_all(); }

/// The tensor stored under `key` (the debugger's per-tensor files use "data").
inline torch::Tensor load_single(const std::filesystem::path& path, std::string_view key = "data") {
  return Reader(path).load(key);
}

}  // namespace tracetorch::safetensors

namespace tracetorch::detail {

/// The whole file into `writer`; `path` names the file in errors. Nothing is written before
/// everything is checked.
inline void write_safetensors(AtomicFileWriter& writer, const std::filesystem::path& path,
                              const safetensors::NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<const std::pair<std::string, torch::Tensor>*> sorted;
  sorted.reserve(tensors.size());
  for (const auto& item : tensors) sorted.push_back(&item);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });

  // Everything is checked before the file is created, so a refused save leaves nothing.
  std::string json = "{";
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto& [name, tensor] = *sorted[i];
    const std::string tensor_name = "tensor " + detail::quoted_for_message(name);
    if (i != 0 && sorted[i - 1]->first == name) {
      detail::save_failed(path, "two tensors named " + detail::quoted_for_message(name));
    }
    if (name == "__metadata__") detail::save_failed(path, "\"__metadata__\" is reserved, not a tensor name");
    if (!tensor.defined()) detail::save_failed(path, tensor_name + " is undefined");
    if (tensor.layout() != c10::kStrided) detail::save_failed(path, tensor_name + " is not a dense (strided) tensor");
    if (tensor.device().is_meta()) detail::save_failed(path, tensor_name + " is on the meta device and has no data");
    const auto* dtype = detail::safetensors_dtype(tensor.scalar_type());
    if (dtype == nullptr) {
      detail::save_failed(path, tensor_name + " has dtype " + std::string(c10::toString(tensor.scalar_type())) +
                                    ", which safetensors cannot store");
    }
    if (i != 0) json += ',';
    if (!detail::append_ascii_json_string(json, name)) detail::save_failed(path, tensor_name + " is not valid UTF-8");
    json += ":{\"dtype\":\"";
    json += dtype->name;
    json += "\",\"shape\":[";
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      if (d != 0) json += ',';
      json += std::to_string(tensor.size(d));
    }
    const auto bytes = static_cast<std::uint64_t>(tensor.numel()) * dtype->size;
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  if (!metadata.empty()) {
    json += sorted.empty() ? "\"__metadata__\":{" : ",\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) json += ',';
      first = false;
      const bool valid_key = detail::append_ascii_json_string(json, key);
      json += ':';
      if (!valid_key || !detail::append_ascii_json_string(json, value)) {
        detail::save_failed(path, "metadata entry " + detail::quoted_for_message(key) + " is not valid UTF-8");
      }
    }
    json += '}';
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');

  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(std::uint64_t(json.size()) >> (8 * i));

  writer.write(length, sizeof length);
  writer.write(json);
  for (const auto* item : sorted) {
    torch::Tensor tensor = item->second.detach();
    if (tensor.numel() == 0) continue;
    try {
      // Lazy conjugate/negative views hold unmodified data; materialise them first.
      if (tensor.is_conj() || tensor.is_neg()) tensor = tensor.resolve_conj().resolve_neg();
      // A contiguous CPU tensor is written straight from its memory; anything else is copied
      // once into a contiguous CPU tensor (one tensor at a time, so at most one copy is alive).
      // Not tensor.to(kCPU, MemoryFormat::Contiguous): for a transposed CPU tensor that returns
      // the tensor itself.
      if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
        tensor = torch::empty(tensor.sizes(), tensor.options().device(torch::kCPU)).copy_(tensor);
      }
    } catch (const c10::Error& e) {
      detail::save_failed(path, "tensor " + detail::quoted_for_message(item->first) +
                                    ": cannot copy to the CPU: " + e.what_without_backtrace());
    }
    writer.write(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()) * tensor.element_size());
  }
}

}  // namespace tracetorch::detail

namespace tracetorch::safetensors {

/// Writes `tensors` (any device, layout strided, any strides) and `metadata` to `path`,
/// byte for byte as the reference writer does: entries sorted by name, data in that order.
/// The file appears only once complete (written beside it, then renamed). Throws Error for
/// duplicate or invalid (non-UTF-8, "__metadata__") names, dtypes safetensors cannot hold,
/// undefined or sparse tensors, and I/O failures.
inline void save(const std::filesystem::path& path, const NamedTensors& tensors,
                 const std::map<std::string, std::string>& metadata = {}) {
  detail::AtomicFileWriter writer(path);
  detail::write_safetensors(writer, path, tensors, metadata);
  writer.commit();
}

/// Writes one tensor under the key "data", the layout of the debugger's per-tensor files.
inline void save(const std::filesystem::path& path, const torch::Tensor& tensor) {
  save(path, NamedTensors{{"data", tensor}});
}

}  // namespace tracetorch::safetensors
