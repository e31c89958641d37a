// llama_trace: runs the example Llama port under tracetorch's model addition debugger and
// writes a transformers-compatible trace.
//
//   llama_trace [--config config.json] [--weights model.safetensors] [--input-ids input_ids.safetensors]
//               [--batch B] [--seq S] [--seed N] --debug-path DIR [--no-prune-layers] [--safetensors]
//               [--output-hidden-states] [--output-attentions] [--dump-captured DIR]

#include "llama/llama.hpp"

#include <tracetorch/tracetorch.hpp>

#include <boost/json.hpp>

#include <charconv>
#include <cstdlib>
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

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

template <class Int>
Int parse_number(const std::string& flag, const std::string& text, Int minimum) {
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < minimum) {
    throw UsageError(flag + " needs an integer >= " + std::to_string(minimum) + ", got '" + text + "'");
  }
  return value;
}

Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  bool have_debug_path = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (flag == "--config") {
      args.config = value();
    } else if (flag == "--weights") {
      args.weights = value();
    } else if (flag == "--input-ids") {
      args.input_ids = value();
    } else if (flag == "--batch") {
      args.batch = parse_number<std::int64_t>(flag, value(), 1);
    } else if (flag == "--seq") {
      args.seq = parse_number<std::int64_t>(flag, value(), 1);
    } else if (flag == "--seed") {
      args.seed = parse_number<std::uint64_t>(flag, value(), 0);
    } else if (flag == "--debug-path") {
      args.debug_path = value();
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
      args.dump_captured = value();
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

torch::Tensor read_input_ids(const std::filesystem::path& path, std::int64_t vocab_size) {
  tracetorch::safetensors::Reader reader(path);
  std::string name = "input_ids";
  if (!reader.contains(name)) {
    if (reader.header().tensors.size() != 1) {
      throw tracetorch::Error("llama_trace: " + path.string() + " holds no tensor \"input_ids\"");
    }
    name = reader.header().tensors.front().name;
  }
  auto ids = reader.load(name);
  if (ids.dim() != 2 || ids.scalar_type() != torch::kInt64) {
    throw tracetorch::Error("llama_trace: " + path.string() + ": input ids must be an int64 [batch, seq] tensor");
  }
  if (ids.numel() > 0 && (ids.min().item<std::int64_t>() < 0 || ids.max().item<std::int64_t>() >= vocab_size)) {
    throw tracetorch::Error("llama_trace: " + path.string() + ": input ids outside [0, vocab_size=" +
                            std::to_string(vocab_size) + ")");
  }
  return ids;
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

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  try {
    args = parse_arguments(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "llama_trace: " << e.what() << "\n\n" << kUsage;
    return 2;
  }
  try {
    const llama::LlamaConfig config = args.config ? llama::LlamaConfig::from_json_file(*args.config) : llama::LlamaConfig{};
    torch::manual_seed(args.seed);
    llama::LlamaModel model(config);
    model->eval();
    if (args.weights) llama::load_state_dict(*model, *args.weights);
    const torch::Tensor input_ids = args.input_ids ? read_input_ids(*args.input_ids, config.vocab_size)
                                                   : torch::randint(0, config.vocab_size, {args.batch, args.seq});
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
