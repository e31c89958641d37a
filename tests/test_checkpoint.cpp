// tracetorch/checkpoint.hpp: transformers checkpoints (one file or sharded) loaded by name, the
// dtype policies, strict and non-strict names, ties, and refusals that leave the module unchanged.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#include <llama/llama.hpp>

#include <boost/json.hpp>

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace ckpt = tracetorch::checkpoint;
namespace fs = std::filesystem;
using tracetorch_test::TempDir;

// A causal LM head tied to its embedding (transformers' tie_word_embeddings), with a
// non-persistent buffer: the shapes a checkpoint loader meets.
struct TinyLmImpl : tracetorch::nn::Module {
  TinyLmImpl() {
    embed = register_module("embed", tracetorch::nn::Embedding(10, 4));
    norm = register_parameter("norm", torch::ones({4}));
    inv_freq = register_buffer("inv_freq", torch::ones({2}), {.persistent = false});
    lm_head = register_module("lm_head", tracetorch::nn::Linear(torch::nn::LinearOptions(4, 10).bias(false)));
  }
  tracetorch::nn::Embedding embed{nullptr};
  tracetorch::nn::Linear lm_head{nullptr};
  torch::Tensor norm, inv_freq;
};
TRACEABLE(TinyLm);

/// Copies of a module's parameters and persistent buffers, by name.
std::map<std::string, torch::Tensor> values_of(const torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : tracetorch::nn::state_dict(module)) out.emplace(name, tensor.detach().clone());
  return out;
}

bool same_values(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, tensor] : a) {
    const auto other = b.find(name);
    if (other == b.end() || tensor.scalar_type() != other->second.scalar_type() || !torch::equal(tensor, other->second)) {
      return false;
    }
  }
  return true;
}

/// Seeded values for every tensor of a TinyLm, as a checkpoint would hold them.
tracetorch::safetensors::NamedTensors tiny_lm_weights(c10::ScalarType dtype = torch::kFloat32) {
  torch::manual_seed(7);
  return {{"embed.weight", torch::randn({10, 4}).to(dtype)},
          {"norm", torch::randn({4}).to(dtype)},
          {"lm_head.weight", torch::randn({10, 4}).to(dtype)}};
}

tracetorch::safetensors::NamedTensors without(tracetorch::safetensors::NamedTensors tensors, const std::string& name) {
  std::erase_if(tensors, [&](const auto& item) { return item.first == name; });
  return tensors;
}

using tracetorch_test::write_text;

/// transformers' model.safetensors.index.json for `weight_map` (tensor -> shard file name).
void write_index(const fs::path& path, const std::map<std::string, std::string>& weight_map) {
  boost::json::object map;
  for (const auto& [tensor, file] : weight_map) map[tensor] = file;
  boost::json::object root;
  root["metadata"] = boost::json::object{{"total_size", 0}};
  root["weight_map"] = std::move(map);
  write_text(path, boost::json::serialize(root));
}

/// The message of the tracetorch::Error `f` throws; "" (and a failed check) if it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const tracetorch::Error& e) {
    return e.what();
  }
  DOCTEST_FAIL_CHECK("no tracetorch::Error was thrown");
  return "";
}

llama::LlamaModel tiny_llama() {
  return llama::LlamaModel(llama::LlamaConfig::from_json_file(tracetorch_test::tiny_llama_dir() / "config.json"));
}

}  // namespace

DOCTEST_TEST_SUITE("checkpoint") {

DOCTEST_TEST_CASE("checkpoint: the tiny Llama split in two shards with an index loads the same parameters as the single file") {
  const auto single_file = tracetorch_test::tiny_llama_dir() / "model.safetensors";
  auto single = tiny_llama();
  const auto single_report = ckpt::load(*single, single_file);
  DOCTEST_CHECK(single_report.files == std::vector<fs::path>{single_file});
  DOCTEST_CHECK(single_report.loaded == tracetorch::nn::state_dict(*single).size());
  DOCTEST_CHECK(single_report.converted.empty());

  // transformers' layout: model-0000k-of-00002.safetensors, half the tensors each, and the index.
  TempDir dir;
  const auto tensors = tracetorch::safetensors::load(single_file);
  tracetorch::safetensors::NamedTensors first, second;
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, tensor] : tensors) {
    const bool in_first = first.size() < tensors.size() / 2;
    (in_first ? first : second).emplace_back(name, tensor);
    weight_map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  tracetorch::safetensors::save(dir / "model-00001-of-00002.safetensors", first);
  tracetorch::safetensors::save(dir / "model-00002-of-00002.safetensors", second);
  write_index(dir / "model.safetensors.index.json", weight_map);

  for (const auto& path : {dir.path(), dir / "model.safetensors.index.json"}) {
    DOCTEST_INFO(path.string());
    auto sharded = tiny_llama();
    DOCTEST_REQUIRE_FALSE(same_values(values_of(*sharded), values_of(*single)));  // random init differs
    const auto report = ckpt::load(*sharded, path);
    DOCTEST_CHECK(report.files.size() == 2);
    DOCTEST_CHECK(report.loaded == single_report.loaded);
    DOCTEST_CHECK(same_values(values_of(*sharded), values_of(*single)));
  }
}

DOCTEST_TEST_CASE("checkpoint: a bf16 checkpoint under each dtype policy") {
  TempDir dir;
  tracetorch::safetensors::save(dir / "model.safetensors", tiny_lm_weights(torch::kBFloat16));

  // keep (the default): a float32 module refuses it, naming file, tensor and both dtypes.
  TinyLm model;
  const auto before = values_of(*model);
  const auto message = error_of([&] { ckpt::load(*model, dir.path()); });
  DOCTEST_CHECK(message.find((dir / "model.safetensors").string()) != std::string::npos);
  DOCTEST_CHECK(message.find("tensor \"norm\" is BFloat16 but the module's is Float") != std::string::npos);
  DOCTEST_CHECK(same_values(values_of(*model), before));

  // keep: a module built in bf16 loads it as it is.
  TinyLm in_bf16;
  in_bf16->to(torch::kBFloat16);
  const auto kept = ckpt::load(*in_bf16, dir.path(), {.dtype = ckpt::DtypePolicy::keep});
  DOCTEST_CHECK(kept.converted.empty());
  DOCTEST_CHECK(kept.loaded == 3);
  DOCTEST_CHECK(torch::equal(in_bf16->embed->weight, tiny_lm_weights(torch::kBFloat16)[0].second));

  // convert: every tensor is converted to float32, and each conversion is listed.
  const auto report = ckpt::load(*model, dir.path(), {.dtype = ckpt::DtypePolicy::convert});
  std::vector<std::string> names;
  for (const auto& conversion : report.converted) {
    names.push_back(conversion.name);
    DOCTEST_CHECK((conversion.from == torch::kBFloat16));
    DOCTEST_CHECK((conversion.to == torch::kFloat32));
  }
  DOCTEST_CHECK(names == std::vector<std::string>{"norm", "embed.weight", "lm_head.weight"});  // state_dict order
  DOCTEST_CHECK((model->embed->weight.scalar_type() == torch::kFloat32));
  DOCTEST_CHECK(torch::equal(model->embed->weight, tiny_lm_weights(torch::kBFloat16)[0].second.to(torch::kFloat32)));

  // A float32 checkpoint into a float32 module: nothing to convert, nothing listed.
  tracetorch::safetensors::save(dir / "model.safetensors", tiny_lm_weights());
  DOCTEST_CHECK(ckpt::load(*model, dir.path(), {.dtype = ckpt::DtypePolicy::convert}).converted.empty());
}

DOCTEST_TEST_CASE("checkpoint: strict names every missing and unexpected tensor - non-strict returns them") {
  TempDir dir;
  auto tensors = without(tiny_lm_weights(), "norm");
  tensors.emplace_back("extra.weight", torch::zeros({2}));
  tensors.emplace_back("inv_freq", torch::zeros({2}));  // a non-persistent buffer: not accepted
  tracetorch::safetensors::save(dir / "model.safetensors", tensors);

  TinyLm model;
  const auto before = values_of(*model);
  const auto message = error_of([&] { ckpt::load(*model, dir / "model.safetensors"); });
  DOCTEST_CHECK(message == "tracetorch: " + (dir / "model.safetensors").string() +
                               ": missing tensor \"norm\"; unexpected tensor \"extra.weight\"; unexpected tensor "
                               "\"inv_freq\" (the module has no such parameter or persistent buffer)");
  DOCTEST_CHECK(same_values(values_of(*model), before));

  const auto report = ckpt::load(*model, dir / "model.safetensors", {.strict = false});
  DOCTEST_CHECK(report.missing_keys == std::vector<std::string>{"norm"});
  DOCTEST_CHECK(report.unexpected_keys == std::vector<std::string>{"extra.weight", "inv_freq"});
  DOCTEST_CHECK(report.loaded == 2);
  DOCTEST_CHECK(torch::equal(model->lm_head->weight, tensors[1].second));
  DOCTEST_CHECK(torch::equal(model->norm, before.at("norm")));        // missing: left as it was
  DOCTEST_CHECK(torch::equal(model->inv_freq, torch::ones({2})));     // non-persistent: never loaded
}

DOCTEST_TEST_CASE("checkpoint: a declared tie fills a tied tensor the checkpoint leaves out") {
  TempDir dir;
  const auto weights = tiny_lm_weights();
  tracetorch::safetensors::save(dir / "model.safetensors", without(weights, "lm_head.weight"));

  TinyLm model;
  DOCTEST_CHECK(error_of([&] { ckpt::load(*model, dir.path()); }).ends_with(": missing tensor \"lm_head.weight\""));

  const auto report = ckpt::load(*model, dir.path(), {.tied = {{"lm_head.weight", "embed.weight"}}});
  DOCTEST_CHECK(report.tied == std::vector<std::string>{"lm_head.weight"});
  DOCTEST_CHECK(report.loaded == 3);
  DOCTEST_CHECK(torch::equal(model->lm_head->weight, weights[0].second));
  DOCTEST_CHECK(torch::equal(model->embed->weight, weights[0].second));

  // Present in the checkpoint, a tied name loads as itself.
  tracetorch::safetensors::save(dir / "model.safetensors", weights);
  DOCTEST_CHECK(ckpt::load(*model, dir.path(), {.tied = {{"lm_head.weight", "embed.weight"}}}).tied.empty());
  DOCTEST_CHECK(torch::equal(model->lm_head->weight, weights[2].second));

  // A tie must name the module's tensors.
  DOCTEST_CHECK(error_of([&] { ckpt::load(*model, dir.path(), {.tied = {{"lm_head.weight", "embed_tokens.weight"}}}); })
                    .find("the module has no parameter or persistent buffer \"embed_tokens.weight\"") != std::string::npos);
}

DOCTEST_TEST_CASE("checkpoint: each refusal names the file and the tensor and leaves the module unchanged") {
  TempDir root;
  const auto dir = root / "checkpoint";
  fs::create_directories(dir);
  const auto weights = tiny_lm_weights();
  tracetorch::safetensors::save(root / "outside.safetensors", {weights[0]});
  tracetorch::safetensors::save(dir / "a.safetensors", {weights[0]});
  tracetorch::safetensors::save(dir / "b.safetensors", {weights[1], weights[2]});
  const auto index = dir / "model.safetensors.index.json";
  const std::map<std::string, std::string> good{
      {"embed.weight", "a.safetensors"}, {"norm", "b.safetensors"}, {"lm_head.weight", "b.safetensors"}};

  TinyLm model;
  const auto before = values_of(*model);
  const auto refused = [&](const std::string& expected) {
    DOCTEST_INFO("expected: " << expected);
    const auto message = error_of([&] { ckpt::load(*model, dir); });
    DOCTEST_CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
    DOCTEST_CHECK(same_values(values_of(*model), before));
  };
  const auto with_shard = [&](const std::string& file) {
    auto map = good;
    map["embed.weight"] = file;
    write_index(index, map);
  };

  with_shard("../outside.safetensors");
  refused(index.string() + ": tensor \"embed.weight\": shard \"../outside.safetensors\" lies outside the checkpoint folder");
  with_shard("sub/../../outside.safetensors");
  refused("shard \"sub/../../outside.safetensors\" lies outside the checkpoint folder");
  with_shard((root / "outside.safetensors").string());
  refused(": tensor \"embed.weight\": shard \"" + (root / "outside.safetensors").string() + "\" is an absolute path");
  fs::create_symlink(root / "outside.safetensors", dir / "link.safetensors");
  with_shard("link.safetensors");
  refused(": tensor \"embed.weight\": shard \"link.safetensors\" resolves to " + fs::canonical(root / "outside.safetensors").string() +
          ", outside the checkpoint folder");
  // Hugging Face's cache links each file of snapshots/<revision>/ to ../../blobs/: accepted when asked.
  DOCTEST_CHECK(ckpt::load(*model, dir, {.shard_links_may_leave_folder = true}).loaded == 3);
  DOCTEST_CHECK(torch::equal(model->embed->weight, weights[0].second));
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : tracetorch::nn::state_dict(*model)) tensor.copy_(before.at(name));
  }
  fs::create_directory_symlink(root.path(), dir / "up");
  with_shard("up/outside.safetensors");
  refused("shard \"up/outside.safetensors\" resolves to");
  with_shard(std::string("a.safetensors\0/../b.safetensors", 31));
  refused("shard \"a.safetensors\\x00/../b.safetensors\" holds a NUL byte");
  with_shard("model-00003-of-00003.safetensors");
  refused(": tensor \"embed.weight\": shard \"model-00003-of-00003.safetensors\" is missing");

  // The index disagrees with its shards.
  with_shard("b.safetensors");
  refused(": tensor \"embed.weight\": the index puts it in " + (dir / "b.safetensors").string() + ", which does not hold it");
  auto unlisted = good;
  unlisted.erase("norm");
  write_index(index, unlisted);
  refused(": shard " + (dir / "b.safetensors").string() + " holds tensor \"norm\", which the index does not list");

  // Malformed index files.
  write_text(index, "{\"weight_map\": {\"norm\": \"b.safetensors\",");
  refused(index.string() + ": index is not valid JSON");
  write_text(index, R"({"weight_map": {"norm": "b.safetensors", "norm": "a.safetensors"}})");
  refused(index.string() + ": index has duplicate key \"norm\"");
  write_text(index, R"({"metadata": {}})");
  refused(index.string() + ": index has no \"weight_map\"");
  write_text(index, R"({"weight_map": ["a.safetensors"]})");
  refused(index.string() + ": \"weight_map\" is [\"a.safetensors\"], not an object of file names");
  write_text(index, R"({"weight_map": {"norm": 3}})");
  refused(index.string() + ": tensor \"norm\": shard is 3, not a file name");

  // A shard whose tensor does not fit its parameter.
  write_index(index, good);
  tracetorch::safetensors::save(dir / "b.safetensors", {weights[1], {"lm_head.weight", torch::zeros({4, 10})}});
  refused((dir / "b.safetensors").string() + ": tensor \"lm_head.weight\" has shape [4, 10] but the module expects [10, 4]");

  // A folder with neither file.
  fs::remove(index);
  refused(dir.string() + ": the folder has neither model.safetensors nor model.safetensors.index.json");

  // A symbolic link that stays inside the folder is a shard like any other.
  tracetorch::safetensors::save(dir / "b.safetensors", {weights[1], weights[2]});
  fs::create_symlink("a.safetensors", dir / "also_a.safetensors");
  with_shard("also_a.safetensors");
  DOCTEST_CHECK(ckpt::load(*model, dir).loaded == 3);
  DOCTEST_CHECK(torch::equal(model->norm, weights[1].second));
}

}  // DOCTEST_TEST_SUITE
