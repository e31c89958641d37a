#pragma once
/// \file
/// The model addition debugger: the C++ form of transformers' `model_addition_debugger_context`.
///
/// \code
/// {
///   auto guard = tracetorch::model_addition_debugger(model, {.debug_path = "dbg", .do_prune_layers = false});
///   auto out = model->forward(input_ids);  // writes dbg/LlamaModel_debug_tree_{SUMMARY,FULL_TENSORS}.json
/// }
/// \endcode

#include <torch/torch.h>

#include <fcntl.h>   // AT_FDCWD, AT_EACCESS
#include <unistd.h>  // faccessat, link, unlink

#include <boost/json.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>  // min_max
#endif

#include "tracetorch/detail/io/atomic_file.hpp"
#include "tracetorch/detail/attachments.hpp"
#include "tracetorch/detail/call.hpp"
#include "tracetorch/detail/debugger/debug_io.hpp"
#include "tracetorch/detail/debugger/forward_memory.hpp"
#include "tracetorch/detail/python_json.hpp"
#include "tracetorch/detail/debugger/repeated_tensors.hpp"
#include "tracetorch/detail/debugger/spare_files.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/python_repr.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch {

/// Options of `model_addition_debugger`, named and defaulted as in transformers.
struct DebuggerOptions {
  /// Where the JSON files (and, without use_repr, the .safetensors files) go; created if
  /// missing. Empty: the current directory.
  std::filesystem::path debug_path;
  /// Keep only the first and last of each run of numbered layer blocks (`layers.0` ... `layers.N`).
  bool do_prune_layers = true;
  /// true: tensor values as Python's print lines in _FULL_TENSORS.json; false: one
  /// `<module_path>_<inputs|outputs>_....safetensors` file per tensor, key "data".
  bool use_repr = true;
  /// This process's rank in a multi-process run; only rank 0 records. Default: $RANK, else 0.
  std::optional<int> rank;
  /// A tensor recorded again, unchanged, in the same forward (one module's output passed on to
  /// the next: half of a Llama's records) is encoded once: its later records are copies of the
  /// first, and with use_repr=false its later files are hard links to the first one (copies
  /// where the filesystem has no hard links). The trace reads the same either way; false
  /// computes every record and writes every file on its own.
  bool reuse_repeated_tensors = true;
  /// With use_repr=false: the files a trace replaces are kept, in a hidden directory of
  /// debug_path (`.tracetorch-spares-<pid>-<n>`) removed when the process exits, and the next
  /// trace into debug_path from this process writes over them instead of into new files: on a
  /// VM that hands freed memory back to its host that was 10-20x faster. Costs disk: up to a second
  /// copy of the trace while the process runs. A spare that another process has open or mapped,
  /// or that has another link, is never written over. false: the replaced files are deleted.
  bool reuse_previous_files = true;
};

class DebuggerScope;
template <class ModuleType>
DebuggerScope model_addition_debugger(const std::shared_ptr<ModuleType>& model, DebuggerOptions options = {});

namespace detail {

/// Turns one tensor into its JSON record; `prefix` is the file stem transformers would use.
class TensorEncoder {
 public:
  /// The record of `tensor`, its values in `storage`.
  virtual boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix, boost::json::storage_ptr storage) = 0;

 protected:
  ~TensorEncoder() = default;
};

/// Sets `slot` to the JSON string `text`, in the slot's own storage.
inline void set_text(boost::json::value& slot, std::string_view text) {
  slot.emplace_string().assign(text.data(), text.size());
}

/// Builds the JSON of a call's inputs or outputs as transformers' `_serialize_io` does: leaves
/// as their Python repr, tensors through the encoder, each named by its place in the call
/// (`<prefix>_args_0`, `<prefix>_kwargs_<name>`, then `_<index>` or `_<key>` per level).
class TraceJsonBuilder final : public ArgumentVisitor {
 public:
  /// The values it builds are in `storage`.
  TraceJsonBuilder(std::string prefix, TensorEncoder& encoder, boost::json::storage_ptr storage)
      : prefix_(std::move(prefix)),
        base_size_(prefix_.size()),
        encoder_(encoder),
        root_(storage),
        positional_(storage),
        keywords_(storage) {}

  /// The one value visited (a call's result).
  boost::json::value take_value() { return std::move(root_); }
  /// `{"args": [...], "kwargs": {...}}`, empty parts dropped unless `keep_empty`.
  boost::json::object take_arguments(bool keep_empty) {
    boost::json::object out(root_.storage());
    if (keep_empty || !positional_.empty()) out["args"] = std::move(positional_);
    if (keep_empty || !keywords_.empty()) out["kwargs"] = std::move(keywords_);
    return out;
  }

  void none() override { place("None"); }
  void boolean(bool value) override { place(value ? "True" : "False"); }
  void integer(std::int64_t value) override { place(std::to_string(value)); }
  void floating(double value) override { place(python_repr(value)); }
  void string(std::string_view value) override { place(python_repr(value)); }
  void dtype(c10::ScalarType value) override { place(python_dtype_repr(value)); }
  void tensor(const torch::Tensor& value) override {
    *next_ = encoder_.encode(value, prefix_, next_->storage());
    next_ = nullptr;
  }
  void repr(std::string_view python_repr) override { place(python_repr); }
  void begin_sequence() override { open(boost::json::kind::array); }
  void begin_mapping() override { open(boost::json::kind::object); }
  void element(std::size_t index) override {
    name_next(std::to_string(index));
    next_ = &open_.back().container->as_array().emplace_back(nullptr);
  }
  void entry(std::string_view key) override {
    name_next(key);
    next_ = &open_.back().container->as_object()[key];
  }
  void end() override { open_.pop_back(); }
  void positional(std::size_t index) override {
    prefix_.resize(base_size_);
    prefix_ += "_args_";
    prefix_ += std::to_string(index);
    next_ = &positional_.emplace_back(nullptr);
  }
  void keyword(std::string_view name) override {
    prefix_.resize(base_size_);
    prefix_ += "_kwargs_";
    prefix_ += name;
    next_ = &keywords_[name];
  }

 private:
  // An open container and the length of the prefix that names it. The pointers stay valid:
  // a container's parent gets no new value until the container is closed.
  struct Open {
    boost::json::value* container;
    std::size_t prefix_size;
  };

  void name_next(std::string_view suffix) {
    prefix_.resize(open_.back().prefix_size);
    prefix_ += '_';
    prefix_ += suffix;
  }
  void place(std::string_view text) {
    set_text(*next_, text);
    next_ = nullptr;
  }
  void open(boost::json::kind kind) {
    if (kind == boost::json::kind::array) {
      next_->emplace_array();
    } else {
      next_->emplace_object();
    }
    open_.push_back({next_, prefix_.size()});
    next_ = nullptr;
  }

  std::string prefix_;
  std::size_t base_size_;
  TensorEncoder& encoder_;
  boost::json::value root_;
  boost::json::array positional_;
  boost::json::object keywords_;
  boost::json::value* next_ = &root_;
  std::vector<Open> open_;
};

/// One module call, as transformers' debugger records it. Its strings, children and JSON
/// values live in one forward's arena (forward_memory.hpp).
struct CallNode {
  CallNode(std::string_view path, ForwardArena& memory)
      : module_path(path, &memory), inputs(memory.json_storage()), children(&memory) {}

  std::pmr::string module_path;
  boost::json::object inputs;
  std::optional<boost::json::value> outputs;  // nullopt: no "outputs" key
  std::pmr::vector<CallNode> children;
  std::size_t files_before = 0;  // tensor files the forward had written when this call began
};

inline bool is_layer_block(const CallNode& node) {
  // Python: re.match(r"(.*)\.(\d+)$", path) and a child path containing ".<number>.".
  const std::string_view path = node.module_path;
  std::size_t digits = 0;
  while (digits < path.size() && std::isdigit(static_cast<unsigned char>(path[path.size() - 1 - digits]))) ++digits;
  if (digits == 0 || digits == path.size() || path[path.size() - 1 - digits] != '.') return false;
  if (node.children.empty()) return false;
  const std::string needle = "." + std::string(path.substr(path.size() - digits)) + ".";
  for (const auto& child : node.children) {
    if (child.module_path.find(needle) != std::string::npos) return true;
  }
  return false;
}

/// Keeps the first and last layer block among each node's children.
inline void prune_intermediate_layers(CallNode& node) {
  if (node.children.empty()) return;
  std::vector<std::size_t> blocks;
  for (std::size_t i = 0; i < node.children.size(); ++i) {
    if (is_layer_block(node.children[i])) blocks.push_back(i);
  }
  if (blocks.size() > 2) {
    std::pmr::vector<CallNode> kept(node.children.get_allocator());
    kept.reserve(node.children.size() - blocks.size() + 2);
    for (std::size_t i = 0; i < node.children.size(); ++i) {
      const bool middle_block = std::find(blocks.begin() + 1, blocks.end() - 1, i) != blocks.end() - 1;
      if (!middle_block) kept.push_back(std::move(node.children[i]));
    }
    node.children = std::move(kept);
  }
  for (auto& child : node.children) prune_intermediate_layers(child);
}

/// A node as `json.dump(indent=2)` writes it; outputs only on leaves (prune_outputs_if_children).
/// `drain(out)` runs after each child, so the caller can pass the text on in pieces.
template <class Drain>
void append_call_node(std::string& out, const CallNode& node, int depth, bool strip_values, Drain& drain) {
  const auto key = [&](std::string_view name) {
    out += '\n';
    out.append(static_cast<std::size_t>(depth + 1) * 2, ' ');
    append_json_string(out, name);
    out += ": ";
  };
  out += '{';
  key("module_path");
  append_json_string(out, node.module_path);
  out += ',';
  key("inputs");
  append_python_json(out, node.inputs, depth + 1, strip_values);
  if (node.children.empty()) {
    if (node.outputs) {
      out += ',';
      key("outputs");
      append_python_json(out, *node.outputs, depth + 1, strip_values);
    }
  } else {
    out += ',';
    key("children");
    out += '[';
    bool first = true;
    for (const auto& child : node.children) {
      if (!first) out += ',';
      first = false;
      out += '\n';
      out.append(static_cast<std::size_t>(depth + 2) * 2, ' ');
      append_call_node(out, child, depth + 2, strip_values, drain);
      drain(out);
    }
    out += '\n';
    out.append(static_cast<std::size_t>(depth + 1) * 2, ' ');
    out += ']';
  }
  out += '\n';
  out.append(static_cast<std::size_t>(depth) * 2, ' ');
  out += '}';
}

inline bool is_truthy(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null: return false;
    case boost::json::kind::array: return !value.get_array().empty();
    case boost::json::kind::object: return !value.get_object().empty();
    case boost::json::kind::string: return !value.get_string().empty();
    default: return true;
  }
}

/// The file name (without ".safetensors") for a tensor whose transformers file stem is `stem`.
/// Stems hold module paths and dict keys, and LibTorch allows any submodule name but an empty one
/// or one with a '.': a '/' would reach into other directories, or out of debug_path with a key
/// such as "../x". So '/', '%' (the escape
/// character, so that different stems never share a name) and control characters (0x00-0x1F,
/// 0x7F) become %XX (uppercase hex); every other byte, and so every stem Python's debugger can
/// write, is kept as it is.
inline std::string file_name_for(std::string_view stem) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(stem.size());
  for (const char c : stem) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '/' || c == '%' || byte < 0x20 || byte == 0x7F) {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

inline int rank_from_environment() {
  const char* text = std::getenv("RANK");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long rank = std::strtol(text, &end, 10);
  if (*end != '\0') throw Error(std::string("tracetorch: RANK=") + text + " is not an integer");
  return static_cast<int>(rank);
}

/// The sum of (double(x) - mean)^2 over `count` floats, as LibTorch's std() of a whole float
/// CPU tensor computes it (mean being the tensor's float mean()), but in eight interleaved
/// partial sums that the compiler vectorises: 3-4x faster. The float std that follows is
/// LibTorch's except where the two double sums, both within ~count x 1e-16 of the exact one,
/// fall on either side of a float rounding boundary (none in the tests' random tensors).
inline double squared_deviations(const float* data, std::int64_t count, double mean) {
  constexpr std::int64_t kLanes = 8;
  double sums[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (std::int64_t k = 0; k < kLanes; ++k) {
      const double deviation = static_cast<double>(data[i + k]) - mean;
      sums[k] += deviation * deviation;
    }
  }
  double rest = 0;  // a sum of its own: updating sums[0] here would keep the loop above scalar
  for (; i < count; ++i) {
    const double deviation = static_cast<double>(data[i]) - mean;
    rest += deviation * deviation;
  }
  return (((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))) + rest;
}

/// The least and greatest of `count` (> 0) floats, both NaN where any is NaN, as LibTorch's
/// aminmax() finds them (of -0.0 and 0.0 either may come back). With SSE, eight at a time:
/// GCC does not vectorise the comparisons itself (they are not IEEE min/max), and the scalar
/// loop was slower than the LibTorch call it replaced.
inline std::pair<float, float> min_max(const float* data, std::int64_t count) {
  std::int64_t i = 0;
  float low = data[0], high = data[0];
  bool nan = false;
#if defined(__SSE__)
  if (count >= 8) {
    // minps(x, m) is `x < m ? x : m`: a NaN x leaves m as it was, so NaNs are counted apart.
    __m128 low0 = _mm_set1_ps(data[0]), low1 = low0, high0 = low0, high1 = low0;
    __m128 nan0 = _mm_setzero_ps(), nan1 = nan0;
    for (; i + 8 <= count; i += 8) {
      const __m128 a = _mm_loadu_ps(data + i), b = _mm_loadu_ps(data + i + 4);
      low0 = _mm_min_ps(a, low0);
      low1 = _mm_min_ps(b, low1);
      high0 = _mm_max_ps(a, high0);
      high1 = _mm_max_ps(b, high1);
      nan0 = _mm_or_ps(nan0, _mm_cmpunord_ps(a, a));
      nan1 = _mm_or_ps(nan1, _mm_cmpunord_ps(b, b));
    }
    alignas(16) float lows[8], highs[8];
    _mm_store_ps(lows, low0);
    _mm_store_ps(lows + 4, low1);
    _mm_store_ps(highs, high0);
    _mm_store_ps(highs + 4, high1);
    for (int k = 0; k < 8; ++k) {
      low = lows[k] < low ? lows[k] : low;
      high = highs[k] > high ? highs[k] : high;
    }
    nan = _mm_movemask_ps(_mm_or_ps(nan0, nan1)) != 0;
  }
#endif
  for (; i < count; ++i) {
    low = data[i] < low ? data[i] : low;
    high = data[i] > high ? data[i] : high;
    nan |= data[i] != data[i];
  }
  if (nan) return {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()};
  return {low, high};
}

/// mean, std, min and max as transformers' debugger prints them (repr of each 0-d tensor).
inline void add_statistics(boost::json::object& record, const torch::Tensor& tensor) {
  const auto stat = [&](const char* name, auto&& compute) {
    try {
      set_text(record[name], compute());
    } catch (const c10::Error&) {
      // An empty tensor has no min/max: Python raises there; the trace leaves them out.
    }
  };
  if (tensor.scalar_type() == torch::kFloat32 && tensor.device().is_cpu() && tensor.layout() == c10::kStrided &&
      tensor.is_contiguous() && !tensor.is_neg() && tensor.numel() > 0) {
    const auto count = tensor.numel();
    const float* data = tensor.data_ptr<float>();
    // LibTorch's mean() of a float CPU tensor is its float sum() divided, in float, by the
    // count (ReduceOps.cpp, mean_out): the same two steps here skip its second operation.
    const float mean = *torch::sum(tensor).data_ptr<float>() / static_cast<float>(count);
    set_text(record["mean"], scalar_tensor_repr(mean, torch::kFloat32));
    const double sum = squared_deviations(data, count, mean);
    const double variance = sum / static_cast<double>(std::max<std::int64_t>(0, count - 1));
    set_text(record["std"], scalar_tensor_repr(static_cast<float>(std::sqrt(variance)), torch::kFloat32));
    // Where the answer is zero, min()/max() are asked again: which of -0.0 and 0.0 each
    // returns depends on its own order of visits.
    const auto [min_value, max_value] = min_max(data, count);
    set_text(record["min"], min_value == 0 ? python_repr(tensor.min()) : scalar_tensor_repr(min_value, torch::kFloat32));
    set_text(record["max"], max_value == 0 ? python_repr(tensor.max()) : scalar_tensor_repr(max_value, torch::kFloat32));
    return;
  }
  stat("mean", [&] { return python_repr(tensor.mean()); });
  stat("std", [&] { return python_repr(tensor.std()); });
  // min()/max() copy a non-contiguous tensor first; for an expanded view (a stride-0
  // dimension) that copy can be far larger than the tensor's memory, so amin()/amax()
  // read it in place (they differ only in which zero they return among -0.0 and 0.0).
  bool expanded = false;
  if (tensor.layout() == c10::kStrided) {  // sparse tensors have no strides
    for (std::int64_t d = 0; d < tensor.dim(); ++d) expanded |= tensor.stride(d) == 0 && tensor.size(d) > 1;
  }
  stat("min", [&] { return python_repr(expanded ? tensor.amin() : tensor.min()); });
  stat("max", [&] { return python_repr(expanded ? tensor.amax() : tensor.max()); });
}

/// Records the calls of one model's forward and writes the trace when the root returns.
class DebuggerSession final : public CallObserver, public TensorEncoder {
 public:
  DebuggerSession(std::string root_name, DebuggerOptions options)
      : root_name_(std::move(root_name)), options_(std::move(options)) {}

  // CallObserver
  bool on_enter(const Attachment& at, const CallArgs& args) override {
    const auto me = std::this_thread::get_id();
    if (at.is_root && owner_.load(std::memory_order_relaxed) != me) {
      // One compare-exchange, so that of two threads starting a forward at once exactly one
      // records; the other's forward runs untraced.
      std::thread::id nobody;
      if (!owner_.compare_exchange_strong(nobody, me)) return false;
      if (closing_.load()) {  // the scope is ending: no new forward (see close())
        owner_.store(std::thread::id());
        owner_.notify_all();
        return false;
      }
      begin_forward();
      try {
        push(at, args, true);
      } catch (...) {
        end_forward(false);
        throw;
      }
      return true;
    }
    if (owner_.load(std::memory_order_relaxed) != me) return false;
    if (at.is_root) ++nested_root_calls_;
    push(at, args, false);
    return true;
  }

  /// The attachments whose calls finish_forward checks (set once, after attaching).
  void watch(const AttachmentSet& attachments) noexcept { watched_ = &attachments; }
  const std::vector<std::string>& modules_not_called() const noexcept { return not_called_; }

  /// The scope's end: no forward starts from now on, and one that another thread is recording
  /// runs to its end, whole, before this returns; only then are the attachments freed.
  /// (closing_ is set before owner_ is read, and on_enter claims owner_ before reading closing_:
  /// either the claim sees the scope closing and backs out, or this sees the claim and waits.)
  void close() noexcept {
    closing_.store(true);
    for (auto owner = owner_.load(); owner != std::thread::id() && owner != std::this_thread::get_id();
         owner = owner_.load()) {
      owner_.wait(owner);
    }
  }

  void on_exit(const Attachment& at, const CallResult& result) override {
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
    if (at.is_root && nested_root_calls_ == 0) {
      try {
        finish_forward(result);
      } catch (...) {
        end_forward(false);
        throw;
      }
      end_forward(true);
      return;
    }
    if (at.is_root) --nested_root_calls_;
    auto& stack = forward_->stack;
    CallNode node = std::move(stack.back());
    stack.pop_back();
    if (at.has_children) {
      node.outputs.emplace(nullptr, arena_.json_storage());
    } else {
      TraceJsonBuilder outputs(file_stem(at, node) + "_outputs", *this, arena_.json_storage());
      try {
        result.visit(outputs);
        node.outputs = outputs.take_value();
      } catch (...) {
        discard_files_from(node.files_before);  // the model may catch this and go on
        throw;
      }
    }
    stack.back().children.push_back(std::move(node));
  }

  void on_unwind(const Attachment& at) noexcept override {
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
    if (at.is_root && nested_root_calls_ == 0) {
      end_forward(false);
      return;
    }
    if (at.is_root) --nested_root_calls_;
    auto& stack = forward_->stack;
    if (stack.empty()) return;
    // The model may catch the exception and go on: the failed call leaves no node and no file.
    discard_files_from(stack.back().files_before);
    stack.pop_back();
  }

  // TensorEncoder
  boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix, boost::json::storage_ptr storage) override {
    std::optional<TensorFingerprint> identity;
    if (options_.reuse_repeated_tensors && (identity = fingerprint(tensor))) {
      if (const EncodedTensor* seen = find_encoded(*identity)) {
        boost::json::object record(seen->record, storage);
        if (options_.use_repr) {
          record["value"] = print_lines(seen->printed, storage);
        } else {
          set_text(record["value"], link_or_write(tensor, prefix, seen->file_index));
        }
        return record;
      }
    }
    boost::json::object record(storage);
    set_text(record["shape"], python_shape_repr(tensor.sizes()));
    set_text(record["dtype"], python_dtype_repr(tensor.scalar_type()));
    std::string printed;
    if (options_.use_repr) {
      printed = python_repr(tensor);
      record["value"] = print_lines(printed, storage);
    } else {
      set_text(record["value"], write_tensor_file(tensor, prefix));
    }
    const auto type = tensor.scalar_type();
    if (type == torch::kFloat16 || type == torch::kFloat32 || type == torch::kBFloat16) add_statistics(record, tensor);
    if (identity) {
      // Kept with the print as one string, not its lines: one copy instead of one per line.
      boost::json::object kept(arena_.json_storage());
      kept.reserve(record.size());
      for (const auto& entry : record) {
        if (options_.use_repr && entry.key() == "value") {
          kept.emplace(entry.key(), nullptr);
        } else {
          kept.emplace(entry.key(), entry.value());
        }
      }
      const std::size_t file_index = options_.use_repr ? 0 : forward_->written_files.size() - 1;
      const c10::StorageImpl* address = identity->address();  // before the move below
      forward_->encoded.emplace(
          address, EncodedTensor{std::move(*identity), std::move(kept), std::pmr::string(printed, &arena_), file_index});
    }
    return record;
  }

  /// Root, then JSON file names, for error messages and tests.
  std::filesystem::path full_tensors_path() const {
    return options_.debug_path / (root_name_ + "_debug_tree_FULL_TENSORS.json");
  }
  std::filesystem::path summary_path() const { return options_.debug_path / (root_name_ + "_debug_tree_SUMMARY.json"); }

 private:
  /// A tensor this forward has encoded, for reuse_repeated_tensors.
  struct EncodedTensor {
    TensorFingerprint fingerprint;
    boost::json::object record;  // use_repr=true: "value" is null, the lines are in `printed`
    std::pmr::string printed;
    std::size_t file_index;  // use_repr=false: its file in written_files
  };

  /// python_print_lines, but each line straight into the JSON array.
  static boost::json::array print_lines(std::string_view printed, boost::json::storage_ptr storage) {
    boost::json::array lines(std::move(storage));
    for_each_line(printed, [&](std::string_view line) { lines.emplace_back(line); });
    return lines;
  }

  const EncodedTensor* find_encoded(const TensorFingerprint& identity) const {
    const auto [begin, end] = forward_->encoded.equal_range(identity.address());
    for (auto it = begin; it != end; ++it) {
      if (it->second.fingerprint.same_as(identity)) return &it->second;
    }
    return nullptr;
  }

  /// Writes `tensor` to the file transformers names after `prefix`; returns the JSON value.
  std::string write_tensor_file(const torch::Tensor& tensor, const std::string& prefix) {
    const std::string file_name = file_name_for(prefix) + ".safetensors";
    const auto path = options_.debug_path / file_name;
    // Written under a temporary name and renamed with the JSON files at the end of the
    // forward: a forward that fails leaves the files of the previous trace as they were.
    std::optional<detail::AtomicFileWriter> writer;
    const auto staged = spares_ ? spares_->claim(file_name) : std::nullopt;
    if (staged) {
      writer.emplace(path, *staged, overwrite_existing);
    } else {
      writer.emplace(path);
    }
    detail::write_safetensors(*writer, path, {{"data", tensor}}, {});
    add_staged_file(writer->release(), path, staged.has_value());
    return "./" + file_name;
  }

  /// The file for a tensor already written as written_files[index]: a hard link to that file,
  /// or a copy where the filesystem has no hard links.
  std::string link_or_write(const torch::Tensor& tensor, const std::string& prefix, std::size_t index) {
    if (hard_links_work_) {
      const std::string file_name = file_name_for(prefix) + ".safetensors";
      auto path = options_.debug_path / file_name;
      const auto in_spares = spares_ ? spares_->claim(file_name) : std::nullopt;
      auto staged = in_spares ? *in_spares : unique_temp_path(path);
      if (in_spares) ::unlink(staged.c_str());  // the spare of a name that is a link this time
      if (::link(forward_->written_files[index].staged.c_str(), staged.c_str()) == 0) {
        add_staged_file(staged, path, in_spares.has_value());
        return "./" + file_name;
      }
      hard_links_work_ = false;  // EPERM (no hard links on this filesystem), EMLINK, ...
    }
    return write_tensor_file(tensor, prefix);
  }

  void begin_forward() {
    no_grad_.emplace();
    if (!options_.use_repr && options_.reuse_previous_files) {
      // Spares only where this forward replaces a trace: a first trace into a directory makes
      // no hidden directory there.
      try {
        std::error_code ignored;
        spares_ = SpareFilesRegistry::instance().borrow(options_.debug_path,
                                                        std::filesystem::exists(full_tensors_path(), ignored));
        if (spares_ && !spares_->prepare()) spares_.reset();
      } catch (const std::exception&) {
        spares_.reset();  // out of memory: this forward writes new files, as without spares
      }
    }
    forward_.emplace(arena_);
    nested_root_calls_ = 0;
  }

  void end_forward(bool keep_files) noexcept {
    if (!keep_files) discard_files_from(0);
    if (spares_) {
      spares_->forget_claims();
      // A failed forward with no spares to keep (one that would have replaced a first trace)
      // takes its hidden directory with it: the directory is left as it was.
      try {
        if (keep_files || !spares_->empty()) SpareFilesRegistry::instance().give_back(std::move(spares_));
      } catch (const std::exception&) {
      }
      spares_.reset();  // not given back: removed with its directory
    }
    forward_.reset();
    arena_.rewind();  // nothing the forward allocated there is alive now
    no_grad_.reset();
    owner_.store(std::thread::id());
    owner_.notify_all();
  }

  /// transformers' file stem is the module path; a module called again in the same forward
  /// gets `_call<N>` so that no call's tensors overwrite another's.
  std::string file_stem(const Attachment& at, const CallNode& node) const {
    const auto found = forward_->call_counts.find(&at);
    const int call = found == forward_->call_counts.end() ? 1 : found->second;
    std::string stem(node.module_path);
    if (call > 1) stem += "_call" + std::to_string(call);
    return stem;
  }

  void push(const Attachment& at, const CallArgs& args, bool root) {
    CallNode node(root ? root_name_ : at.module_path, arena_);
    node.files_before = forward_->written_files.size();
    ++forward_->call_counts[&at];
    TraceJsonBuilder inputs(file_stem(at, node) + "_inputs", *this, arena_.json_storage());
    try {
      args.visit(inputs);
      node.inputs = inputs.take_arguments(/*keep_empty=*/root);
    } catch (...) {
      discard_files_from(node.files_before);
      throw;
    }
    forward_->stack.push_back(std::move(node));
  }

  /// Removes the staged tensor files written since the forward had written `count`.
  void discard_files_from(std::size_t count) noexcept {
    if (!forward_) return;
    auto& files = forward_->written_files;
    std::error_code ignored;
    for (std::size_t i = count; i < files.size(); ++i) std::filesystem::remove(files[i].staged, ignored);
    if (count < files.size()) files.erase(files.begin() + static_cast<std::ptrdiff_t>(count), files.end());
    if (!options_.use_repr) std::erase_if(forward_->encoded, [&](const auto& entry) { return entry.second.file_index >= count; });
  }

  void finish_forward(const CallResult& result) {
    note_modules_not_called();
    CallNode root = std::move(forward_->stack.back());
    forward_->stack.pop_back();
    TraceJsonBuilder builder(root_name_ + "_outputs", *this, arena_.json_storage());
    result.visit(builder);
    boost::json::value outputs = builder.take_value();
    if (is_truthy(outputs)) root.outputs = std::move(outputs);  // the root drops falsy keys
    if (options_.do_prune_layers) prune_intermediate_layers(root);
    // Both JSON files are complete on disk before any file of this trace takes its final name,
    // so a full disk leaves the previous trace whole instead of half replaced.
    AtomicFileWriter full(full_tensors_path());
    write_json_text(full, root, false);
    AtomicFileWriter summary(summary_path());
    write_json_text(summary, root, true);
    if (spares_) spares_->drop_unclaimed();
    for (const auto& file : forward_->written_files) {
      std::error_code ec;
      const std::filesystem::path staged(file.staged), target(file.target);
      if (file.in_spares) {
        spares_->placed(staged.filename().string(), replace_file_keeping_old(staged, target, ec));
      } else {
        replace_file(staged, target, ec);
      }
      if (ec) throw Error("tracetorch: cannot write " + target.string() + ": " + ec.message());
    }
    forward_->written_files.clear();  // renamed: nothing left to remove
    full.commit();
    summary.commit();
  }

  /// Writes the JSON text of the tree under `root` in pieces of about 64 KiB: built whole, the
  /// text of a large trace was a fresh multi-megabyte string each forward, and faulting in its
  /// pages cost more than writing it.
  static void write_json_text(AtomicFileWriter& file, const CallNode& root, bool strip_values) {
    constexpr std::size_t kPiece = 64 * 1024;
    std::string text;
    text.reserve(2 * kPiece);
    const auto drain = [&](std::string& out) {
      if (out.size() < kPiece) return;
      file.write(out);
      out.clear();
    };
    append_call_node(text, root, 0, strip_values, drain);
    file.write(text);
    file.finish();
  }

  /// Traced modules that did not run through their traced forward in this forward: not called,
  /// or called through their Impl (`static_cast<LayerImpl&>(*layer).forward(x)`), which no
  /// observer can see. Warned about once per scope, on stderr, as the trace lacks them silently.
  void note_modules_not_called() {
    not_called_.clear();
    if (watched_ == nullptr) return;
    for (const auto& at : watched_->entries()) {
      if (!at->is_root && !forward_->call_counts.contains(at.get())) not_called_.push_back(at->module_path);
    }
    if (not_called_.empty() || warned_not_called_) return;
    warned_not_called_ = true;
    const std::string warning = "tracetorch: warning: " + std::to_string(not_called_.size()) + " traced module(s) of " +
                                root_name_ + " did not run through their traced forward in this forward (first: " +
                                not_called_.front() +
                                "); a module called through its Impl is missing from the trace "
                                "(DebuggerScope::modules_not_called() lists them)\n";
    std::fputs(warning.c_str(), stderr);
  }

  std::string root_name_;
  DebuggerOptions options_;
  const AttachmentSet* watched_ = nullptr;
  std::vector<std::string> not_called_;
  bool warned_not_called_ = false;
  std::atomic<std::thread::id> owner_{};
  std::atomic<bool> closing_{false};
  int nested_root_calls_ = 0;
  struct StagedFile {
    std::pmr::string staged;
    std::pmr::string target;
    bool in_spares;  // staged in spares_' directory
  };
  /// What one forward builds, all of it in arena_ (forward_memory.hpp says why).
  struct ForwardState {
    explicit ForwardState(ForwardArena& memory)
        : stack(&memory), call_counts(&memory), written_files(&memory), encoded(&memory) {}
    std::pmr::vector<CallNode> stack;
    std::pmr::map<const Attachment*, int> call_counts;
    std::pmr::vector<StagedFile> written_files;
    std::pmr::unordered_multimap<const c10::StorageImpl*, EncodedTensor> encoded;
  };
  void add_staged_file(const std::filesystem::path& staged, const std::filesystem::path& target, bool in_spares) {
    forward_->written_files.push_back(
        {std::pmr::string(staged.native(), &arena_), std::pmr::string(target.native(), &arena_), in_spares});
  }

  ForwardArena arena_;  // before forward_: destroyed after it
  std::optional<ForwardState> forward_;  // between begin_forward and end_forward
  bool hard_links_work_ = true;
  std::unique_ptr<SpareFiles> spares_;  // lent for one forward, with reuse_previous_files
  std::optional<torch::NoGradGuard> no_grad_;
};

/// Only model_addition_debugger makes scopes.
class ScopeAccess {
  template <class ModuleType>
  friend DebuggerScope tracetorch::model_addition_debugger(const std::shared_ptr<ModuleType>&, DebuggerOptions);
  friend DebuggerScope open_debugger(torch::nn::Module& model, const std::string& root_name, DebuggerOptions options);
  ScopeAccess() = default;
};

DebuggerScope open_debugger(torch::nn::Module& model, const std::string& root_name, DebuggerOptions options);

}  // namespace detail

/// The scope of `model_addition_debugger`: while it lives, each forward of the root module is
/// traced; the model is left as it was when it ends.
class [[nodiscard]] DebuggerScope {
 public:
  /// Made by model_addition_debugger.
  DebuggerScope(detail::ScopeAccess, std::unique_ptr<detail::DebuggerSession> session,
                std::unique_ptr<detail::AttachmentSet> attachments) noexcept
      : session_(std::move(session)), attachments_(std::move(attachments)) {}
  DebuggerScope(DebuggerScope&&) noexcept = default;
  DebuggerScope& operator=(DebuggerScope&&) = delete;  // would free a session still attached
  ~DebuggerScope() {
    if (session_) session_->close();
    attachments_.reset();
  }

  /// Modules under the root that are not TRACEABLE (plain LibTorch modules): their calls are
  /// not in the trace. Empty on a rank other than 0.
  const std::vector<std::string>& untraced_modules() const noexcept { return attachments_->untraced(); }
  /// Where the next forward writes _FULL_TENSORS.json / _SUMMARY.json (empty on other ranks).
  std::filesystem::path full_tensors_path() const { return session_ ? session_->full_tensors_path() : std::filesystem::path(); }
  std::filesystem::path summary_path() const { return session_ ? session_->summary_path() : std::filesystem::path(); }
  /// Traced modules under the root that did not run through their traced forward in the last
  /// traced forward: not called, or called through their Impl (then missing from the trace;
  /// the first such forward also warns on stderr).
  std::vector<std::string> modules_not_called() const {
    return session_ ? session_->modules_not_called() : std::vector<std::string>();
  }

 private:
  // Declared in this order so that the attachments are removed before the session dies.
  std::unique_ptr<detail::DebuggerSession> session_;
  std::unique_ptr<detail::AttachmentSet> attachments_;
};

/// Traces every forward of `model` while the returned scope lives; see DebuggerOptions.
/// Throws tracetorch::Error if debug_path cannot be created or written.
template <class ModuleType>
DebuggerScope model_addition_debugger(const std::shared_ptr<ModuleType>& model, DebuggerOptions options) {
#ifdef TRACETORCH_DISABLE
  // Compiled out: a scope that attaches nothing and writes nothing.
  (void)model, (void)options;
  return DebuggerScope(detail::ScopeAccess(), nullptr, std::make_unique<detail::AttachmentSet>());
#else
  static_assert(std::is_base_of_v<detail::TracedModuleBase, ModuleType>,
                "tracetorch::model_addition_debugger: the root module must be declared with TRACEABLE(Name)");
  if (!model) throw Error("tracetorch: model_addition_debugger: the model is empty (a null holder)");
  return detail::open_debugger(*model, std::string(model->traced_name()), std::move(options));
#endif
}

template <class ModuleType>
DebuggerScope model_addition_debugger(torch::nn::ModuleHolder<ModuleType>& model, DebuggerOptions options = {}) {
  return model_addition_debugger(model.ptr(), std::move(options));
}


namespace detail {

/// model_addition_debugger for a module known by reference and name.
inline DebuggerScope open_debugger(torch::nn::Module& model, const std::string& root_name, DebuggerOptions options) {
  auto attachments = std::make_unique<detail::AttachmentSet>();
  const int rank = options.rank ? *options.rank : detail::rank_from_environment();
  if (rank != 0) return DebuggerScope(detail::ScopeAccess(), nullptr, std::move(attachments));
  if (options.debug_path.empty()) options.debug_path = ".";
  std::error_code ec;
  std::filesystem::create_directories(options.debug_path, ec);
  if (ec || !std::filesystem::is_directory(options.debug_path)) {
    throw Error("tracetorch: cannot create debug_path " + options.debug_path.string() + ": " +
                (ec ? ec.message() : std::string("not a directory")));
  }
  // Fail now, not after a long forward, when the directory is not writable (permissions, a
  // read-only filesystem). Asked of the kernel: creating and removing a probe file cost more
  // than the rest of a small model's trace setup.
  if (::faccessat(AT_FDCWD, options.debug_path.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    throw Error("tracetorch: cannot write in debug_path " + options.debug_path.string() + ": " + std::strerror(errno));
  }
  auto session = std::make_unique<detail::DebuggerSession>(root_name, std::move(options));
  attachments->attach(model, root_name, *session);
  session->watch(*attachments);
  return DebuggerScope(detail::ScopeAccess(), std::move(session), std::move(attachments));
}

/// What `debug_io=true` in a call's options runs (detail/debug_io.hpp): the call, traced.
inline void run_debug_io(torch::nn::Module& root, std::string_view root_name, const DebugIoRequest& request,
                         const std::function<void()>& call) {
  const auto scope = open_debugger(root, std::string(root_name),
                                   {.debug_path = request.debug_io_dir, .do_prune_layers = request.prune_layers});
  call();
}

// Every translation unit that includes the debugger makes it reachable from debug_io calls (a
// non-inline static: its initializer runs at start-up whether or not anything names it).
[[maybe_unused]] static const bool debug_io_available = (debug_io_runner().store(&run_debug_io), true);

}  // namespace detail

}  // namespace tracetorch
