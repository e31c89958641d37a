#pragma once
/// \file
/// Reading a trace (<Root>_debug_tree_FULL_TENSORS.json, tracetorch's or transformers') into a flat
/// list of module calls and their values in execution order, within fixed bounds. No LibTorch
/// here: JSON text in, structs out, so the trace fuzzer runs it without the tensor library.

#include <boost/json.hpp>

#include <unistd.h>  // access

#include <charconv>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/directory_lock.hpp"
#include "tracetorch/detail/fs/read_file.hpp"
#include "tracetorch/detail/trace_format/format.hpp"

namespace tracetorch::detail {

/// A rank's slice of a recorded value (module replay on a tensor-parallel rank): elements
/// [offset, offset + size) of dimension `dim`, whose full size is `full`.
struct TraceSlice {
  std::int64_t dim = 0, offset = 0, size = 0, full = 0;
};

/// One value recorded for a module call: a tensor, or any other value (None, a number, a string).
struct TraceSlot {
  std::string location;  ///< "inputs.args.0", "inputs.kwargs.mask", "outputs", "outputs.1"
  std::size_t order = 0;  ///< position in the execution order of the whole trace
  bool is_tensor = false;
  // A tensor:
  std::vector<std::int64_t> shape;
  std::string dtype;                 ///< as written, "torch.float32"
  std::string file;                  ///< use_repr=false: the value, "./<stem>.safetensors"
  std::vector<std::string> lines;    ///< use_repr=true: the lines of Python's print(tensor)
  std::map<std::string, std::string> stats;  ///< mean/std/min/max as written, "tensor(-5.1862e-03)"
  // Anything else: its JSON text.
  std::string text;
  /// Not in the JSON: a root output found as its file (the debugger leaves a root's outputs out).
  bool from_file_only = false;
  /// Set where `file` is shared with other values and holds another one's tensor (a repeated
  /// call overwrote it): the index in Trace::calls of the call whose value the file holds.
  std::optional<std::size_t> overwritten_by;
  /// Not in the JSON: set for a tensor-parallel rank's replay, where `shape` is the slice's and
  /// the file holds the full tensor (load_trace_tensor cuts it).
  std::optional<TraceSlice> slice;
};

/// One module call; `inputs` are recorded when it starts, `outputs` when it returns (after
/// the calls it made), which is what `order` in the slots reflects.
struct TraceCall {
  std::string module_path;
  std::size_t depth = 0;       ///< 0 for the root
  std::size_t enter_order = 0;  ///< the order its first event takes (its first input's, or a child's): where it starts
  std::size_t exit_order = 0;  ///< order just after its outputs: where its last event lies
  std::vector<TraceSlot> inputs, outputs;
  /// The call's top-level inputs in recorded order, "args.0", "kwargs.mask": a value's position
  /// among them is what aligns `args.N` on one side with `kwargs.NAME` on the other. Kept from
  /// the JSON because an empty container records no slot and would shift positions.
  std::vector<std::string> input_keys;
};

struct Trace {
  std::filesystem::path json_file;
  std::filesystem::path dir;  ///< where "./<stem>.safetensors" values are found
  std::vector<TraceCall> calls;  ///< in the order the calls started (pre-order of the tree)
  std::size_t file_tensors = 0, printed_tensors = 0;
};

/// Deeper JSON than this is refused: it bounds the recursion of the walk (a real trace is a
/// dozen levels deep).
inline constexpr std::size_t kTraceMaxDepth = 256;

/// Each value keeps its full location ("inputs.kwargs.mask.0"), so keys nested deep above many
/// values would repeat: a 1.2 MB file of 200 nested 4 KB keys over 100,000 values asks for
/// 80 GB. The locations of a file of N bytes may take at most this many bytes per input byte
/// (plus kTraceLocationSlack); a real trace's take less than one (docs/reliability.md).
inline constexpr std::size_t kTraceLocationBytesPerInputByte = 8;
inline constexpr std::size_t kTraceLocationSlack = std::size_t(1) << 20;

class TraceParser {
 public:
  explicit TraceParser(std::string_view file) : file_(file) {}

  [[noreturn]] void fail(const std::string& cause) const { throw Error("tracetorch: " + std::string(file_) + ": " + cause); }

  Trace parse(std::string_view text) {
    boost::json::parse_options options;
    options.max_depth = kTraceMaxDepth;
    boost::json::error_code ec;
    boost::json::monotonic_resource resource;
    const boost::json::value root = boost::json::parse(boost::json::string_view(text.data(), text.size()), ec, &resource, options);
    if (ec) fail("not valid JSON: " + ec.message());
    location_budget_ = kTraceLocationSlack + kTraceLocationBytesPerInputByte * text.size();
    Trace trace;
    node(root, "the top level", 0, trace);
    return trace;
  }

  /// The bytes all locations took (bounded by the budget above): what the tests measure.
  std::size_t location_bytes() const { return location_bytes_; }

 private:
  void node(const boost::json::value& value, const std::string& where, std::size_t depth, Trace& trace) {
    const auto* object = value.if_object();
    if (object == nullptr) fail(where + " is not a JSON object (a module call node)");
    const auto* path = object->if_contains(trace_format::kModulePath);
    if (path == nullptr || !path->is_string()) fail(where + " has no \"module_path\" string");
    const std::size_t index = trace.calls.size();
    trace.calls.emplace_back();
    trace.calls[index].module_path = std::string(path->get_string());
    trace.calls[index].depth = depth;
    trace.calls[index].enter_order = next_order_;
    // Cut short for messages: a copy goes into each child's and value's message context, and
    // a long path copied whole per value would cost time quadratic in the file's size.
    const std::string call = "module " + cut_short(trace.calls[index].module_path);
    if (const auto* inputs = object->if_contains(trace_format::kInputs)) {
      trace.calls[index].input_keys = input_keys(*inputs);
      std::vector<TraceSlot> slots;
      location_ = trace_format::kInputs;
      values(*inputs, call, 0, slots, trace);
      trace.calls[index].inputs = std::move(slots);
    }
    if (const auto* children = object->if_contains(trace_format::kChildren)) {
      const auto* array = children->if_array();
      if (array == nullptr) fail(call + ": \"children\" is not a list");
      for (std::size_t i = 0; i < array->size(); ++i) {
        node((*array)[i], call + " children[" + std::to_string(i) + "]", depth + 1, trace);
      }
    }
    if (const auto* outputs = object->if_contains(trace_format::kOutputs)) {
      std::vector<TraceSlot> slots;
      location_ = trace_format::kOutputs;
      values(*outputs, call, 0, slots, trace);
      trace.calls[index].outputs = std::move(slots);
    }
    trace.calls[index].exit_order = next_order_++;
  }

  static std::vector<std::string> input_keys(const boost::json::value& inputs) {
    std::vector<std::string> keys;
    const auto* object = inputs.if_object();
    if (object == nullptr) return keys;
    for (const auto& [key, item] : *object) {
      if (key == trace_format::kArgs && item.is_array()) {
        for (std::size_t i = 0; i < item.get_array().size(); ++i) keys.push_back(std::string(trace_format::kArgs) + '.' + std::to_string(i));
      } else if (key == trace_format::kKwargs && item.is_object()) {
        for (const auto& entry : item.get_object()) keys.push_back(std::string(trace_format::kKwargs) + '.' + std::string(entry.key()));
      }
    }
    return keys;
  }

  // The location is built in one buffer, a key appended on the way down and cut on the way
  // back, so the walk itself holds one location at a time whatever the nesting.
  void values(const boost::json::value& value, const std::string& call, std::size_t depth, std::vector<TraceSlot>& out,
              Trace& trace) {
    if (depth > kTraceMaxDepth) fail(call + " " + short_location() + ": nested too deeply");
    const auto nested = [&](std::string_view key, const boost::json::value& item) {
      const std::size_t length = location_.size();
      location_ += trace_format::kLocationSeparator;
      location_ += key;
      values(item, call, depth + 1, out, trace);
      location_.resize(length);
    };
    if (const auto* object = value.if_object()) {
      if (object->contains(trace_format::kShape) && object->contains(trace_format::kDtype)) {
        out.push_back(tensor(*object, call, trace));
        return;
      }
      for (const auto& [key, item] : *object) nested(std::string_view(key.data(), key.size()), item);
    } else if (const auto* array = value.if_array()) {
      for (std::size_t i = 0; i < array->size(); ++i) nested(std::to_string(i), (*array)[i]);
    } else {
      TraceSlot slot;
      slot.location = take_location(call);
      slot.order = next_order_++;
      slot.text = boost::json::serialize(value);
      out.push_back(std::move(slot));
    }
  }

  /// A copy of the current location for a slot, counted against the budget first.
  std::string take_location(const std::string& call) {
    location_bytes_ += location_.size();
    if (location_bytes_ > location_budget_) {
      fail(call + ": the values' locations take more than " + std::to_string(location_budget_) +
           " bytes, more than this file's size allows (keys nested deep above many values)");
    }
    return location_;
  }

  /// Text for a message, cut short: keys and paths can be megabytes long.
  static std::string cut_short(std::string_view text) {
    return text.size() <= 120 ? std::string(text) : std::string(text.substr(0, 120)) + "...";
  }
  std::string short_location() const { return cut_short(location_); }

  TraceSlot tensor(const boost::json::object& object, const std::string& call, Trace& trace) {
    const std::string where = call + " " + short_location();
    TraceSlot slot;
    slot.location = take_location(call);
    slot.order = next_order_++;
    slot.is_tensor = true;
    const auto* shape = object.at(trace_format::kShape).if_string();
    const auto* dtype = object.at(trace_format::kDtype).if_string();
    if (shape == nullptr || dtype == nullptr) fail(where + ": \"shape\" and \"dtype\" must be strings");
    if (!parse_shape(std::string_view(*shape), slot.shape)) {
      fail(where + ": shape " + std::string(*shape).substr(0, 80) + " is not torch.Size([d0, d1, ...])");
    }
    if (!dtype->starts_with(trace_format::kDtypePrefix) || dtype->size() > 64) {
      fail(where + ": dtype " + std::string(*dtype).substr(0, 80) + " is not torch.<name>");
    }
    slot.dtype = std::string(*dtype);
    for (const char* key : trace_format::kStatistics) {
      if (const auto* stat = object.if_contains(key); stat != nullptr && stat->is_string()) {
        slot.stats.emplace(key, std::string(stat->get_string()));
      }
    }
    const auto* value = object.if_contains(trace_format::kValue);
    if (value == nullptr) {
      fail(where + ": tensor has no \"value\" (a _SUMMARY.json has none: give the _FULL_TENSORS.json)");
    }
    if (const auto* file = value->if_string()) {
      if (!is_safe_relative_file(std::string_view(*file))) {
        fail(where + ": value " + std::string(*file).substr(0, 120) +
             " is not a .safetensors file inside the trace directory (./<name>.safetensors)");
      }
      slot.file = std::string(*file);
      ++trace.file_tensors;
    } else if (const auto* lines = value->if_array()) {
      for (const auto& line : *lines) {
        if (!line.is_string()) fail(where + ": value is a list but not of printed lines (strings)");
        slot.lines.emplace_back(line.get_string());
      }
      ++trace.printed_tensors;
    } else {
      fail(where + ": value is neither a list of printed lines nor a ./<name>.safetensors path");
    }
    return slot;
  }

  /// A value must name a file in the trace directory: relative, no "..", no directories
  /// (the debugger writes "./<stem>.safetensors"), so a trace cannot make the tool read
  /// files elsewhere.
  static bool is_safe_relative_file(std::string_view value) {
    value = trace_format::tensor_file_name(value);
    if (value.empty() || !value.ends_with(trace_format::kTensorFileExtension)) return false;
    if (value.find('/') != std::string_view::npos || value.find('\0') != std::string_view::npos) return false;
    return value != ".." && value != ".";
  }

  std::string_view file_;
  std::size_t next_order_ = 0;
  std::string location_;
  std::size_t location_bytes_ = 0, location_budget_ = 0;

 public:
  /// "torch.Size([2, 7, 64])" -> {2, 7, 64}; "torch.Size([])" -> {}.
  static bool parse_shape(std::string_view text, std::vector<std::int64_t>& shape) {
    constexpr std::string_view prefix = trace_format::kShapePrefix, suffix = trace_format::kShapeSuffix;
    if (!text.starts_with(prefix) || !text.ends_with(suffix) || text.size() < prefix.size() + suffix.size()) return false;
    text = text.substr(prefix.size(), text.size() - prefix.size() - suffix.size());
    shape.clear();
    while (!text.empty()) {
      std::int64_t dim = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), dim);
      if (ec != std::errc() || dim < 0) return false;
      shape.push_back(dim);
      text.remove_prefix(static_cast<std::size_t>(end - text.data()));
      if (text.empty()) break;
      if (!text.starts_with(", ") || text.size() == 2) return false;
      text.remove_prefix(2);
    }
    return true;
  }
};

/// Reads and parses the trace JSON at `json_file` (already resolved): a regular file of at most
/// kMaxTraceJsonBytes. A tensor file it names may be a symbolic link only to a file in the
/// same directory (refused before anything is read).
inline Trace parse_trace_file(const std::filesystem::path& json_file) {
  const std::string text = read_regular_file(json_file, kMaxTraceJsonBytes, "a trace JSON file");
  Trace trace = TraceParser(json_file.string()).parse(text);
  trace.json_file = json_file;
  trace.dir = json_file.parent_path();
  for (const auto& call : trace.calls) {
    for (const auto* slots : {&call.inputs, &call.outputs}) {
      for (const auto& slot : *slots) {
        if (slot.file.empty()) continue;
        refuse_link_out_of(trace.dir.empty() ? "." : trace.dir, trace.dir / trace_format::tensor_file_name(slot.file));
      }
    }
  }
  return trace;
}

/// A trace directory holds exactly one <Root>_debug_tree_FULL_TENSORS.json; a file is taken as is.
inline std::filesystem::path resolve_trace_path(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw Error("tracetorch: " + path.string() + ": no such file or directory");
  if (!std::filesystem::is_directory(status)) return path;
  constexpr std::string_view suffix = trace_format::kFullTensorsSuffix;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.path().filename().string().ends_with(suffix)) found.push_back(entry.path());
  }
  if (ec) throw Error("tracetorch: " + path.string() + ": cannot list the directory: " + ec.message());
  if (found.empty()) throw Error("tracetorch: " + path.string() + ": no *" + std::string(suffix) + " in this directory");
  if (found.size() > 1) {
    throw Error("tracetorch: " + path.string() + ": several *" + std::string(suffix) + " (" + found[0].filename().string() +
                ", " + found[1].filename().string() + "): name the file");
  }
  refuse_link_out_of(path, found[0]);
  return found[0];
}

/// The shared lock on the directory of the trace at `path` (a trace directory, or the directory
/// of a trace JSON file), held while the trace is read: the debugger publishes a trace under the
/// directory's exclusive lock (detail/debugger/trace_publish.hpp), so a reader holding it reads
/// files of one trace only, the previous one or the new one. nullopt where there is nothing to
/// lock (a path that does not exist, which the reader then reports) or the directory cannot be
/// opened or locked (no read permission, a filesystem without flock): such a trace is read
/// without the lock. tracetorch::Error where a writer keeps the lock longer than
/// DirectoryLock::kDefaultTimeout.
inline std::optional<DirectoryLock> lock_trace_for_reading(const std::filesystem::path& path) {
  std::error_code ec;
  const bool is_directory = std::filesystem::is_directory(path, ec);
  auto directory = is_directory ? path : path.parent_path();
  if (directory.empty()) directory = ".";
  // The directory itself, not a symbolic link to it: DirectoryLock locks no link.
  const auto canonical = std::filesystem::canonical(directory, ec);
  if (ec || ::access(canonical.c_str(), R_OK | X_OK) != 0) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  try {
    return DirectoryLock::if_exists(canonical, LockMode::shared);
  } catch (const Error&) {
    if (std::chrono::steady_clock::now() - start >= DirectoryLock::kDefaultTimeout) throw;  // a writer holds it
    return std::nullopt;
  }
}

}  // namespace tracetorch::detail
