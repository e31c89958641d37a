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

#include <unistd.h>  // unlink

#include <boost/json.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tracetorch/detail/atomic_file.hpp"
#include "tracetorch/detail/attachments.hpp"
#include "tracetorch/detail/call.hpp"
#include "tracetorch/detail/python_json.hpp"
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
};

class DebuggerScope;
template <class ModuleType>
DebuggerScope model_addition_debugger(const std::shared_ptr<ModuleType>& model, DebuggerOptions options = {});

namespace detail {

/// Turns one tensor into its JSON record; `prefix` is the file stem transformers would use.
class TensorEncoder {
 public:
  virtual boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix) = 0;

 protected:
  ~TensorEncoder() = default;
};

/// A JSON string value (boost::json::value has no implicit constructor from std::string).
inline boost::json::value json_text(std::string_view text) { return boost::json::string(text); }

/// Builds the JSON of a call's inputs or outputs as transformers' `_serialize_io` does: leaves
/// as their Python repr, tensors through the encoder, each named by its place in the call
/// (`<prefix>_args_0`, `<prefix>_kwargs_<name>`, then `_<index>` or `_<key>` per level).
class TraceJsonBuilder final : public ArgumentVisitor {
 public:
  TraceJsonBuilder(std::string prefix, TensorEncoder& encoder)
      : prefix_(std::move(prefix)), base_size_(prefix_.size()), encoder_(encoder) {}

  /// The one value visited (a call's result).
  boost::json::value take_value() { return std::move(root_); }
  /// `{"args": [...], "kwargs": {...}}`, empty parts dropped unless `keep_empty`.
  boost::json::object take_arguments(bool keep_empty) {
    boost::json::object out;
    if (keep_empty || !positional_.empty()) out["args"] = std::move(positional_);
    if (keep_empty || !keywords_.empty()) out["kwargs"] = std::move(keywords_);
    return out;
  }

  void none() override { place("None"); }
  void boolean(bool value) override { place(value ? "True" : "False"); }
  void integer(std::int64_t value) override { place(json_text(std::to_string(value))); }
  void floating(double value) override { place(json_text(python_repr(value))); }
  void string(std::string_view value) override { place(json_text(python_repr(value))); }
  void dtype(c10::ScalarType value) override { place(json_text(python_dtype_repr(value))); }
  void tensor(const torch::Tensor& value) override { place(encoder_.encode(value, prefix_)); }
  void opaque(std::string_view type_name) override {
    // Python's default repr, with the address already sanitised as the debugger does.
    place(json_text("<" + std::string(type_name) + " object at 0xXXXXXXXX>"));
  }
  void begin_sequence() override { open(boost::json::array()); }
  void begin_mapping() override { open(boost::json::object()); }
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
  void place(boost::json::value value) {
    *next_ = std::move(value);
    next_ = nullptr;
  }
  void open(boost::json::value container) {
    boost::json::value* slot = next_;
    place(std::move(container));
    open_.push_back({slot, prefix_.size()});
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

/// One module call, as transformers' debugger records it.
struct CallNode {
  std::string module_path;
  boost::json::object inputs;
  std::optional<boost::json::value> outputs;  // nullopt: no "outputs" key
  std::vector<CallNode> children;
  std::size_t files_before = 0;  // tensor files the forward had written when this call began
};

inline bool is_layer_block(const CallNode& node) {
  // Python: re.match(r"(.*)\.(\d+)$", path) and a child path containing ".<number>.".
  const std::string& path = node.module_path;
  std::size_t digits = 0;
  while (digits < path.size() && std::isdigit(static_cast<unsigned char>(path[path.size() - 1 - digits]))) ++digits;
  if (digits == 0 || digits == path.size() || path[path.size() - 1 - digits] != '.') return false;
  if (node.children.empty()) return false;
  const std::string needle = "." + path.substr(path.size() - digits) + ".";
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
    std::vector<CallNode> kept;
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
inline void append_call_node(std::string& out, const CallNode& node, int depth, bool strip_values) {
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
      append_call_node(out, child, depth + 2, strip_values);
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

/// mean, std, min and max as transformers' debugger prints them (repr of each 0-d tensor).
inline void add_statistics(boost::json::object& record, const torch::Tensor& tensor) {
  const auto stat = [&](const char* name, auto&& compute) {
    try {
      record[name] = json_text(compute());
    } catch (const c10::Error&) {
      // An empty tensor has no min/max: Python raises there; the trace leaves them out.
    }
  };
  if (tensor.scalar_type() == torch::kFloat32 && tensor.device().is_cpu() && tensor.layout() == c10::kStrided &&
      tensor.is_contiguous() && !tensor.is_neg() && tensor.numel() > 0) {
    const auto mean = tensor.mean();
    record["mean"] = json_text(python_repr(mean));
    const auto count = tensor.numel();
    const double sum = squared_deviations(tensor.data_ptr<float>(), count, *mean.data_ptr<float>());
    const double variance = sum / static_cast<double>(std::max<std::int64_t>(0, count - 1));
    record["std"] = json_text(scalar_tensor_repr(static_cast<float>(std::sqrt(variance)), torch::kFloat32));
    // One pass for both. Where the answer is zero, min()/max() are asked again: which of -0.0
    // and 0.0 each returns depends on its own order of visits.
    const auto [min, max] = torch::aminmax(tensor);
    const float min_value = *min.data_ptr<float>(), max_value = *max.data_ptr<float>();
    record["min"] = json_text(min_value == 0 ? python_repr(tensor.min()) : scalar_tensor_repr(min_value, torch::kFloat32));
    record["max"] = json_text(max_value == 0 ? python_repr(tensor.max()) : scalar_tensor_repr(max_value, torch::kFloat32));
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
  void on_enter(const Attachment& at, const CallArgs& args) override {
    const auto me = std::this_thread::get_id();
    if (at.is_root && owner_.load(std::memory_order_relaxed) != me) {
      // One compare-exchange, so that of two threads starting a forward at once exactly one
      // records; the other's forward runs untraced.
      std::thread::id nobody;
      if (!owner_.compare_exchange_strong(nobody, me)) return;
      begin_forward();
      try {
        push(at, args, true);
      } catch (...) {
        end_forward(false);
        throw;
      }
      return;
    }
    if (owner_.load(std::memory_order_relaxed) != me) return;
    if (at.is_root) ++nested_root_calls_;
    push(at, args, false);
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
    CallNode node = std::move(stack_.back());
    stack_.pop_back();
    if (at.has_children) {
      node.outputs = boost::json::value(nullptr);
    } else {
      TraceJsonBuilder outputs(file_stem(at, node) + "_outputs", *this);
      try {
        result.visit(outputs);
        node.outputs = outputs.take_value();
      } catch (...) {
        discard_files_from(node.files_before);  // the model may catch this and go on
        throw;
      }
    }
    stack_.back().children.push_back(std::move(node));
  }

  void on_unwind(const Attachment& at) noexcept override {
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
    if (at.is_root && nested_root_calls_ == 0) {
      end_forward(false);
      return;
    }
    if (at.is_root) --nested_root_calls_;
    if (stack_.empty()) return;
    // The model may catch the exception and go on: the failed call leaves no node and no file.
    discard_files_from(stack_.back().files_before);
    stack_.pop_back();
  }

  // TensorEncoder
  boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix) override {
    boost::json::object record;
    record["shape"] = json_text(python_shape_repr(tensor.sizes()));
    record["dtype"] = json_text(python_dtype_repr(tensor.scalar_type()));
    if (options_.use_repr) {
      // python_print_lines, but each line straight into the JSON array.
      boost::json::array lines;
      for_each_line(python_repr(tensor), [&](std::string_view line) { lines.emplace_back(line); });
      record["value"] = std::move(lines);
    } else {
      const std::string file_name = file_name_for(prefix) + ".safetensors";
      const auto path = options_.debug_path / file_name;
      // Written under a temporary name and renamed with the JSON files at the end of the
      // forward: a forward that fails leaves the files of the previous trace as they were.
      detail::AtomicFileWriter writer(path);
      detail::write_safetensors(writer, path, {{"data", tensor}}, {});
      written_files_.emplace_back(writer.release(), path);
      record["value"] = json_text("./" + file_name);
    }
    const auto type = tensor.scalar_type();
    if (type == torch::kFloat16 || type == torch::kFloat32 || type == torch::kBFloat16) add_statistics(record, tensor);
    return record;
  }

  /// Root, then JSON file names, for error messages and tests.
  std::filesystem::path full_tensors_path() const {
    return options_.debug_path / (root_name_ + "_debug_tree_FULL_TENSORS.json");
  }
  std::filesystem::path summary_path() const { return options_.debug_path / (root_name_ + "_debug_tree_SUMMARY.json"); }

 private:
  void begin_forward() {
    no_grad_.emplace();
    stack_.clear();
    call_counts_.clear();
    written_files_.clear();
    nested_root_calls_ = 0;
  }

  void end_forward(bool keep_files) noexcept {
    if (!keep_files) discard_files_from(0);
    written_files_.clear();
    stack_.clear();
    call_counts_.clear();
    no_grad_.reset();
    owner_.store(std::thread::id());
  }

  /// transformers' file stem is the module path; a module called again in the same forward
  /// gets `_call<N>` so that no call's tensors overwrite another's.
  std::string file_stem(const Attachment& at, const CallNode& node) const {
    const auto found = call_counts_.find(&at);
    const int call = found == call_counts_.end() ? 1 : found->second;
    return call <= 1 ? node.module_path : node.module_path + "_call" + std::to_string(call);
  }

  void push(const Attachment& at, const CallArgs& args, bool root) {
    CallNode node;
    node.module_path = root ? root_name_ : at.module_path;
    node.files_before = written_files_.size();
    ++call_counts_[&at];
    TraceJsonBuilder inputs(file_stem(at, node) + "_inputs", *this);
    try {
      args.visit(inputs);
      node.inputs = inputs.take_arguments(/*keep_empty=*/root);
    } catch (...) {
      discard_files_from(node.files_before);
      throw;
    }
    stack_.push_back(std::move(node));
  }

  /// Removes the staged tensor files written since the forward had written `count`.
  void discard_files_from(std::size_t count) noexcept {
    std::error_code ignored;
    for (std::size_t i = count; i < written_files_.size(); ++i) std::filesystem::remove(written_files_[i].first, ignored);
    if (count < written_files_.size()) written_files_.resize(count);
  }

  void finish_forward(const CallResult& result) {
    CallNode root = std::move(stack_.back());
    stack_.pop_back();
    TraceJsonBuilder builder(root_name_ + "_outputs", *this);
    result.visit(builder);
    boost::json::value outputs = builder.take_value();
    if (is_truthy(outputs)) root.outputs = std::move(outputs);  // the root drops falsy keys
    if (options_.do_prune_layers) prune_intermediate_layers(root);
    std::string text;
    append_call_node(text, root, 0, false);
    // Both JSON files are complete on disk before any file of this trace takes its final name,
    // so a full disk leaves the previous trace whole instead of half replaced.
    AtomicFileWriter full(full_tensors_path());
    full.write(text);
    full.finish();
    text.clear();
    append_call_node(text, root, 0, true);
    AtomicFileWriter summary(summary_path());
    summary.write(text);
    summary.finish();
    for (const auto& [staged, final_path] : written_files_) {
      // Remove the previous file first: ext4 (auto_da_alloc) writes a file's data back
      // synchronously when it is renamed over an existing one, which made this loop cost
      // ~60 us a file; a rename to a free name does not.
      ::unlink(final_path.c_str());
      std::error_code ec;
      std::filesystem::rename(staged, final_path, ec);
      if (ec) throw Error("tracetorch: cannot write " + final_path.string() + ": " + ec.message());
    }
    written_files_.clear();  // renamed: nothing left to remove
    full.commit();
    summary.commit();
  }

  std::string root_name_;
  DebuggerOptions options_;
  std::atomic<std::thread::id> owner_{};
  int nested_root_calls_ = 0;
  std::vector<CallNode> stack_;
  std::map<const Attachment*, int> call_counts_;
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> written_files_;  // staged, final
  std::optional<torch::NoGradGuard> no_grad_;
};

/// Only model_addition_debugger makes scopes.
class ScopeAccess {
  template <class ModuleType>
  friend DebuggerScope tracetorch::model_addition_debugger(const std::shared_ptr<ModuleType>&, DebuggerOptions);
  ScopeAccess() = default;
};

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
  ~DebuggerScope() = default;

  /// Modules under the root that are not TRACEABLE (plain LibTorch modules): their calls are
  /// not in the trace. Empty on a rank other than 0.
  const std::vector<std::string>& untraced_modules() const noexcept { return attachments_->untraced(); }
  /// Where the next forward writes _FULL_TENSORS.json / _SUMMARY.json (empty on other ranks).
  std::filesystem::path full_tensors_path() const { return session_ ? session_->full_tensors_path() : std::filesystem::path(); }
  std::filesystem::path summary_path() const { return session_ ? session_->summary_path() : std::filesystem::path(); }

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
  {  // Fail now, not after a long forward, when the directory is not writable.
    detail::AtomicFileWriter probe(options.debug_path / ".tracetorch-write-test");
  }
  const std::string root_name(model->traced_name());
  auto session = std::make_unique<detail::DebuggerSession>(root_name, std::move(options));
  attachments->attach(*model, root_name, *session);
  return DebuggerScope(detail::ScopeAccess(), std::move(session), std::move(attachments));
#endif
}

template <class ModuleType>
DebuggerScope model_addition_debugger(torch::nn::ModuleHolder<ModuleType>& model, DebuggerOptions options = {}) {
  return model_addition_debugger(model.ptr(), std::move(options));
}

}  // namespace tracetorch
