// llama_trace: runs the example Llama port under tracetorch's model addition debugger and
// writes a transformers-compatible trace.
//
//   llama_trace [--config config.json] [--weights model.safetensors] [--input-ids input_ids.safetensors]
//               [--batch B] [--seq S] [--seed N] --debug-path DIR [--no-prune-layers] [--safetensors]
//               [--output-hidden-states] [--output-attentions] [--dump-captured DIR]

#include "llama/llama.hpp"

#include <tracetorch/tracetorch.hpp>

#include <boost/json.hpp>

#include "command_line.hpp"  // tools/: argv, numbers, main()'s frame

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: llama_trace [--config config.json] [--weights model.safetensors] [--input-ids input_ids.safetensors]\n"
    "                   [--batch B] [--seq S] [--seed N] --debug-path DIR [--no-prune-layers] [--safetensors]\n"
    "                   [--output-hidden-states] [--output-attentions] [--dump-captured DIR]\n"
    "\n"
    "Runs the example Llama (transformers' module names) under tracetorch's model addition debugger\n"
    "and writes DIR/LlamaModel_debug_tree_SUMMARY.json and _FULL_TENSORS.json.\n"
    "  --config           transformers LlamaConfig JSON (default: seed 004's config, hidden 2048, 16 layers)\n"
    "  --weights          transformers checkpoint: model.safetensors, a sharded index .json, or their\n"
    "                     folder (default: seeded random init)\n"
    "  --input-ids        safetensors file holding an int64 [batch, seq] tensor \"input_ids\" (default: random)\n"
    "  --batch, --seq     shape of the random input ids (default 4 x 30)\n"
    "  --seed             random seed (default 673)\n"
    "  --no-prune-layers  keep every layer (default: only the first and last layer block)\n"
    "  --safetensors      one .safetensors file per tensor instead of printed values (use_repr=False)\n"
    "  --output-hidden-states, --output-attentions\n"
    "                     capture them (output_hidden_states=True / output_attentions=True)\n"
    "  --dump-captured    write the captured tensors to DIR/hidden_states_<i>.safetensors and\n"
    "                     DIR/attentions_<i>.safetensors (key \"data\")\n";

using tracetorch::command_line::parse_number;
using tracetorch::command_line::UsageError;

struct Arguments {
  std::optional<std::filesystem::path> config, weights, input_ids;
  std::int64_t batch = 4, seq = 30;
  std::uint64_t seed = 673;
  std::filesystem::path debug_path;
  bool prune_layers = true;
  bool use_repr = true;
  bool output_hidden_states = false;
  bool output_attentions = false;
  std::optional<std::filesystem::path> dump_captured;
};

Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  bool have_debug_path = false;
  for (tracetorch::command_line::ArgumentReader arg(argc, argv); arg.next();) {
    const std::string& flag = arg.name();
    if (flag == "--config") {
      args.config = arg.value();
    } else if (flag == "--weights") {
      args.weights = arg.value();
    } else if (flag == "--input-ids") {
      args.input_ids = arg.value();
    } else if (flag == "--batch") {
      args.batch = parse_number<std::int64_t>(flag, arg.value(), 1);
    } else if (flag == "--seq") {
      args.seq = parse_number<std::int64_t>(flag, arg.value(), 1);
    } else if (flag == "--seed") {
      args.seed = parse_number<std::uint64_t>(flag, arg.value(), 0);
    } else if (flag == "--debug-path") {
      args.debug_path = arg.value();
      have_debug_path = true;
    } else if (flag == "--no-prune-layers") {
      args.prune_layers = false;
    } else if (flag == "--safetensors") {
      args.use_repr = false;
    } else if (flag == "--output-hidden-states") {
      args.output_hidden_states = true;
    } else if (flag == "--output-attentions") {
      args.output_attentions = true;
    } else if (flag == "--dump-captured") {
      args.dump_captured = arg.value();
      if (args.dump_captured->empty()) throw UsageError("--dump-captured needs a directory");
    } else {
      throw UsageError("unknown argument '" + flag + "'");
    }
  }
  if (!have_debug_path || args.debug_path.empty()) throw UsageError("--debug-path DIR is required");
  if (args.dump_captured && !args.output_hidden_states && !args.output_attentions) {
    throw UsageError("--dump-captured needs --output-hidden-states or --output-attentions");
  }
  return args;
}

/// The input ids of a safetensors file, checked from its header before anything is loaded:
/// one int64 [batch, seq] tensor, not empty; then every id within [0, vocab_size).
torch::Tensor read_input_ids(const std::filesystem::path& path, std::int64_t vocab_size) {
  const auto fail = [&](const std::string& why) { throw tracetorch::Error("llama_trace: " + path.string() + ": " + why); };
  tracetorch::safetensors::Reader reader(path);
  std::string name = "input_ids";
  if (!reader.contains(name)) {
    if (reader.header().tensors.size() != 1) fail("holds no tensor \"input_ids\"");
    name = reader.header().tensors.front().name;
  }
  const auto& info = reader.info(name);
  if (info.shape.size() != 2 || info.dtype != torch::kInt64) fail("input ids must be an int64 [batch, seq] tensor");
  if (info.shape[0] == 0 || info.shape[1] == 0) {
    fail("input ids are empty (shape [" + std::to_string(info.shape[0]) + ", " + std::to_string(info.shape[1]) + "])");
  }
  auto ids = reader.load(name);
  if (ids.min().item<std::int64_t>() < 0 || ids.max().item<std::int64_t>() >= vocab_size) {
    fail("input ids outside [0, vocab_size=" + std::to_string(vocab_size) + "): min " +
         std::to_string(ids.min().item<std::int64_t>()) + ", max " + std::to_string(ids.max().item<std::int64_t>()));
  }
  return ids;
}

/// a * b, or nullopt where it overflows.
std::optional<std::uint64_t> times(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  std::uint64_t out = 0;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &out)) return std::nullopt;
  return out;
}
std::optional<std::uint64_t> plus(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  std::uint64_t out = 0;
  if (!a || !b || __builtin_add_overflow(*a, *b, &out)) return std::nullopt;
  return out;
}

/// Refuses a config and input shape whose weights and activations would not fit in this
/// machine's memory, or whose sizes overflow when multiplied, before the model is built: a
/// clear line instead of an allocation failure (or a multiplication that wraps) deep in LibTorch.
void check_fits_in_memory(const llama::LlamaConfig& c, std::int64_t batch, std::int64_t seq) {
  using U = std::optional<std::uint64_t>;
  const auto u = [](std::int64_t v) -> U { return static_cast<std::uint64_t>(v); };  // validated >= 0
  const U head_dim = u(c.hidden_size / c.num_attention_heads);
  const U kv = times(u(c.num_key_value_heads), head_dim);
  // Per layer: q and o (hidden x hidden), k and v (hidden x kv), gate, up, down, two norms.
  U layer = plus(times(u(2), times(u(c.hidden_size), u(c.hidden_size))), times(u(2), times(u(c.hidden_size), kv)));
  layer = plus(plus(layer, times(u(3), times(u(c.hidden_size), u(c.intermediate_size)))), times(u(2), u(c.hidden_size)));
  const U parameters = plus(plus(times(u(c.vocab_size), u(c.hidden_size)), times(u(c.num_hidden_layers), layer)), u(c.hidden_size));
  // The largest activations of a layer: [B, S, intermediate], [B, heads, S, S] and [B, S, hidden];
  // a few of each are alive at once (and the trace's copies): counted 8 times.
  const U tokens = times(u(batch), u(seq));
  U largest = times(tokens, u(std::max(c.hidden_size, c.intermediate_size)));
  const U scores = times(times(u(batch), u(c.num_attention_heads)), times(u(seq), u(seq)));
  if (largest && scores) largest = std::max(*largest, *scores);
  if (!scores) largest = std::nullopt;
  const U bytes = times(u(4), plus(parameters, times(u(8), largest)));
  const std::string shape = " for input ids [" + std::to_string(batch) + ", " + std::to_string(seq) + "]";
  if (!bytes) throw tracetorch::Error("the config's sizes" + shape + " overflow when multiplied: refused");
  const auto pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  const std::uint64_t memory = pages > 0 && page_size > 0 ? std::uint64_t(pages) * std::uint64_t(page_size) : 0;
  if (memory != 0 && *bytes > memory) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    char text[160];
    std::snprintf(text, sizeof text, "needs about %.1f GiB (weights and activations)%s, more than this machine's %.1f GiB: refused",
                  double(*bytes) / kGiB, shape.c_str(), double(memory) / kGiB);
    throw tracetorch::Error(std::string("the config ") + text);
  }
}

/// Prints each leaf's output shape from the written summary: the view one gets by setting
/// breakpoints in every module.
void print_leaf_shapes(const boost::json::value& node) {
  const auto& object = node.as_object();
  if (const auto* children = object.if_contains("children")) {
    for (const auto& child : children->as_array()) print_leaf_shapes(child);
    return;
  }
  const auto* outputs = object.if_contains("outputs");
  std::string shapes;
  const auto collect = [&](const auto& self, const boost::json::value& value) -> void {
    if (value.is_object()) {
      if (const auto* shape = value.as_object().if_contains("shape")) {
        if (!shapes.empty()) shapes += ", ";
        shapes += std::string(shape->as_string());
        return;
      }
      for (const auto& entry : value.as_object()) self(self, entry.value());
    } else if (value.is_array()) {
      for (const auto& element : value.as_array()) self(self, element);
    }
  };
  if (outputs != nullptr) collect(collect, *outputs);
  std::cout << "  " << std::string(object.at("module_path").as_string()) << " -> " << (shapes.empty() ? "(no tensor)" : shapes)
            << "\n";
}

/// Writes hidden_states_<i> / attentions_<i>.safetensors (key "data"); undefined entries are skipped.
void dump_captured(const std::filesystem::path& dir, const llama::BaseModelOutputWithPast& output) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw tracetorch::Error("llama_trace: cannot create " + dir.string() + ": " + ec.message());
  const auto dump = [&](const char* name, const std::optional<std::vector<torch::Tensor>>& tensors) {
    if (!tensors) return;
    for (std::size_t i = 0; i < tensors->size(); ++i) {
      if (!(*tensors)[i].defined()) continue;
      tracetorch::safetensors::save(dir / (std::string(name) + "_" + std::to_string(i) + ".safetensors"), (*tensors)[i]);
    }
    std::cout << "wrote " << tensors->size() << " " << name << " to " << dir.string() << "\n";
  };
  dump("hidden_states", output.hidden_states);
  dump("attentions", output.attentions);
}

/// Traces the model as `args` asks; the exit status (1: an error, printed).
int trace(const Arguments& args) {
  try {
    // Only rank 0 records (the debugger's rule): another rank has nothing to write, so it says so
    // and stops before any work.
    if (const int rank = tracetorch::detail::rank_from_environment(); rank != 0) {
      std::cout << "llama_trace: RANK=" << rank << ": rank " << rank << " writes nothing (only rank 0 traces)\n";
      return 0;
    }
    // Everything read and checked before the model is built: a bad size or id is one line, no allocation.
    const llama::LlamaConfig config = args.config ? llama::LlamaConfig::from_json_file(*args.config) : llama::LlamaConfig{};
    torch::Tensor input_ids;
    if (args.input_ids) input_ids = read_input_ids(*args.input_ids, config.vocab_size);
    check_fits_in_memory(config, input_ids.defined() ? input_ids.size(0) : args.batch,
                         input_ids.defined() ? input_ids.size(1) : args.seq);
    torch::manual_seed(args.seed);  // the random weights, then the random ids, in this order
    llama::LlamaModel model(config);
    model->eval();
    if (args.weights) llama::load_state_dict(*model, *args.weights);
    if (!input_ids.defined()) input_ids = torch::randint(0, config.vocab_size, {args.batch, args.seq});
    llama::BaseModelOutputWithPast output;
    tracetorch::OutputOptions options;
    if (args.output_hidden_states) options.output_hidden_states = true;
    if (args.output_attentions) options.output_attentions = true;
    std::filesystem::path summary, full;
    {
      auto guard = tracetorch::model_addition_debugger(
          model, {.debug_path = args.debug_path, .do_prune_layers = args.prune_layers, .use_repr = args.use_repr});
      output = model({.input_ids = input_ids}, options);
      summary = guard.summary_path();
      full = guard.full_tensors_path();
    }
    std::cout << "llama_trace: traced LlamaModel (" << config.num_hidden_layers << " layers, hidden " << config.hidden_size
              << ") on input_ids " << input_ids.sizes() << " -> last_hidden_state " << output.last_hidden_state.sizes() << "\n";
    std::cout << "wrote " << summary.string() << "\n";
    std::cout << "wrote " << full.string() << (args.use_repr ? "" : " and one .safetensors file per tensor") << "\n";
    if (args.dump_captured) dump_captured(*args.dump_captured, output);
    std::cout << "leaf module outputs:\n";
    std::ifstream in(summary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    print_leaf_shapes(boost::json::parse(text));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "llama_trace: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return tracetorch::command_line::run_program("llama_trace", kUsage, argc, argv, parse_arguments, trace);
}
