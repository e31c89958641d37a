// tracetorch_html_bench: what the HTML report costs on a large diff (docs/performance.md).
// Builds a synthetic diff report of a Llama-shaped trace (seed 004's 16 layers by default; the
// JSON report's own keys, a divergence planted from one layer on) and a replay report of the
// same calls, then times html_report() and writes the page. Needs no LibTorch.
//
//   tracetorch_html_bench [--layers 16] [--values-per-call 4] [--repeats 5] [--out report.html]
//
// bench/html_report_browser.sh opens the written page in headless chromium and reads how long
// its script took to make the page interactive.

#include <tracetorch/html_report.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace {

struct BenchArgs {
  int layers = 16, values_per_call = 4, repeats = 5;
  std::string out = "html_report_bench.html";
};

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--layers") args.layers = std::stoi(value);
    else if (flag == "--values-per-call") args.values_per_call = std::stoi(value);
    else if (flag == "--repeats") args.repeats = std::stoi(value);
    else if (flag == "--out") args.out = value;
    else {
      std::fprintf(stderr, "usage: tracetorch_html_bench [--layers 16] [--values-per-call 4] [--repeats 5] [--out FILE]\n");
      std::exit(2);
    }
  }
  return args;
}

/// The module paths of a Llama forward in call order (upstream's modules; seed 004 has 16 layers).
std::vector<std::string> llama_calls(int layers) {
  std::vector<std::string> out{"LlamaModel", "LlamaModel.embed_tokens", "LlamaModel.rotary_emb"};
  for (int l = 0; l < layers; ++l) {
    const std::string layer = "LlamaModel.layers." + std::to_string(l);
    for (const char* m : {"", ".input_layernorm", ".self_attn", ".self_attn.q_proj", ".self_attn.k_proj", ".self_attn.v_proj",
                          ".self_attn.o_proj", ".post_attention_layernorm", ".mlp", ".mlp.gate_proj", ".mlp.act_fn",
                          ".mlp.up_proj", ".mlp.down_proj"}) {
      out.push_back(layer + m);
    }
  }
  out.push_back("LlamaModel.norm");
  return out;
}

/// One value as DiffReport::json() writes it; `bad` values out of tolerance.
boost::json::object value_json(const std::string& path, int index, double abs_error, bool bad) {
  const std::string location = index == 0 ? "outputs" : "inputs.args." + std::to_string(index - 1);
  return {{"module_path", path}, {"call", 1}, {"location", location}, {"candidate_location", location},
          {"naming_rule", nullptr}, {"order_would_pair", nullptr}, {"status", bad ? "out of tolerance" : "ok"},
          {"kind", bad ? boost::json::value("values") : boost::json::value(nullptr)}, {"accepted", nullptr},
          {"is_tensor", true}, {"printed", false}, {"call_missing", false}, {"root_output_from_file", false},
          {"reference_shape", "torch.Size([4, 30, 2048])"}, {"candidate_shape", "torch.Size([4, 30, 2048])"},
          {"reference_dtype", "torch.float32"}, {"candidate_dtype", "torch.float32"}, {"compared", 245760},
          {"out_of_tolerance", bad ? 1200 : 0}, {"max_abs_error", abs_error}, {"max_rel_error", abs_error * 40},
          {"cosine_similarity", 1 - abs_error}, {"tolerance_ratio", abs_error / 1e-5}, {"atol", 1e-5}, {"rtol", 1e-4}};
}

/// A diff report whose values diverge from the middle layer on, and a replay report of its calls.
std::pair<boost::json::value, boost::json::value> synthetic_reports(const BenchArgs& args) {
  std::mt19937 random(4);
  std::lognormal_distribution<double> small(std::log(2e-7), 1.0), large(std::log(3e-2), 1.0);
  const auto calls = llama_calls(args.layers);
  const std::string bad_from = "LlamaModel.layers." + std::to_string(args.layers / 2) + ".post_attention_layernorm";
  boost::json::array values, replay;
  bool bad = false;
  std::size_t not_accepted = 0;
  for (const auto& path : calls) {
    bad = bad || path == bad_from;
    for (int v = 0; v < args.values_per_call; ++v) values.push_back(value_json(path, v, bad ? large(random) : small(random), bad));
    not_accepted += bad ? args.values_per_call : 0;
    const bool innermost = path == bad_from;
    boost::json::object call{{"path", path}, {"call", 1}, {"status", innermost ? "diverges" : "match"}, {"innermost", innermost},
                             {"reason", ""}};
    if (innermost) call.insert({{"max_abs", 0.05}, {"max_rel", 2.0}, {"elements_out_of_tolerance", 1200}});
    replay.push_back(std::move(call));
  }
  boost::json::object report{{"reference", "seed004_python"}, {"candidate", "seed004_cpp"}, {"atol", 1e-5}, {"rtol", 1e-4},
                             {"within_tolerance", not_accepted == 0}};
  report["differences"] = {{"by_kind", {{"values", not_accepted}}}, {"accepted", 0}, {"not_accepted", not_accepted},
                           {"tensors", values.size()}};
  report["first_divergence"] = {{"module_path", bad_from}, {"call", 1}, {"location", "outputs"}, {"status", "out of tolerance"}};
  report["tensors"] = std::move(values);
  return {std::move(report), std::move(replay)};
}

}  // namespace

int main(int argc, char** argv) {
  const BenchArgs args = parse_args(argc, argv);
  const auto [diff, replay] = synthetic_reports(args);
  // Wall and CPU time: on a shared machine the CPU time is the figure that does not depend on the load.
  std::vector<double> millis, cpu_millis;
  std::string page;
  for (int r = 0; r < std::max(args.repeats, 1); ++r) {
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    page = tracetorch::html_report(diff, &replay);
    cpu_millis.push_back(1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    millis.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(millis.begin(), millis.end());
  std::sort(cpu_millis.begin(), cpu_millis.end());
  const auto start = std::chrono::steady_clock::now();
  tracetorch::write_html_report(args.out, diff, &replay);
  const double write_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::size_t json_bytes = boost::json::serialize(diff).size();
  std::printf("layers %d, %zu module calls, %zu values (JSON report %.2f MB)\n", args.layers, replay.as_array().size(),
              diff.at("tensors").as_array().size(), json_bytes / 1e6);
  std::printf("html_report: median %.1f ms wall, %.1f ms CPU of %zu runs (wall min %.1f, max %.1f); write_html_report %.1f ms;"
              " page %.2f MB -> %s\n", millis[millis.size() / 2], cpu_millis[cpu_millis.size() / 2], millis.size(), millis.front(),
              millis.back(), write_ms, page.size() / 1e6, args.out.c_str());
}
