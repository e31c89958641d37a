// tracetorch/python_repr.hpp against Python's own output: tests/data/repr_cases.json (written by
// tests/data/make_repr_cases.py under torch 1.13.1) and the tiny Llama trace fixtures. The exact
// float formatting underneath: test_python_repr_numbers.cpp; JSON text: test_text_json.cpp.

#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <torch/torch.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/python_repr.hpp"

#include "test_helpers.hpp"

namespace {

namespace json = boost::json;
using tracetorch::python_dtype_repr;
using tracetorch::python_print_lines;
using tracetorch::python_repr;
using tracetorch::python_shape_repr;

const std::filesystem::path kData = TRACETORCH_TEST_DATA;

using tracetorch_test::dtype_named;
using tracetorch_test::from_hex;
using tracetorch_test::int_list;
using tracetorch_test::read_file;

const json::value& repr_cases() {
  static const json::value cases = json::parse(read_file(kData / "repr_cases.json"));
  return cases;
}

double double_from_hex(std::string_view hex) {
  return std::bit_cast<double>(static_cast<std::uint64_t>(std::stoull(std::string(hex), nullptr, 16)));
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

std::vector<std::string> string_list(const json::value& v) {
  std::vector<std::string> out;
  for (const auto& x : v.as_array()) out.emplace_back(x.as_string());
  return out;
}

/// Rebuilds a case's tensor: the base from its bytes (or formula), then the recorded ops.
torch::Tensor build_tensor(const json::object& c) {
  const auto dtype = dtype_named(c.at("dtype").as_string());
  const auto shape = int_list(c.at("shape"));
  torch::Tensor t;
  if (c.contains("meta")) {
    t = torch::empty(shape, torch::TensorOptions().dtype(dtype).device(torch::kMeta));
  } else if (c.contains("arange")) {
    const auto& a = c.at("arange").as_array();
    std::int64_t numel = 1;
    for (const auto s : shape) numel *= s;
    t = (torch::arange(numel, torch::kDouble) * double_from_hex(a[0].as_string()) + double_from_hex(a[1].as_string()))
            .to(dtype)
            .reshape(shape);
  } else {
    const std::string bytes = from_hex(c.at("hex").as_string());
    t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
    if (static_cast<std::size_t>(t.nbytes()) != bytes.size())
      throw std::runtime_error("byte count mismatch for " + std::string(c.at("name").as_string()));
    if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  }
  if (!c.contains("ops")) return t;
  for (const auto& op_value : c.at("ops").as_array()) {
    const auto& op = op_value.as_array();
    const std::string_view name = op[0].as_string();
    if (name == "t") {
      t = t.t();
    } else if (name == "transpose") {
      t = t.transpose(op[1].to_number<std::int64_t>(), op[2].to_number<std::int64_t>());
    } else if (name == "permute") {
      t = t.permute(int_list(op[1]));
    } else if (name == "expand") {
      t = t.expand(int_list(op[1]));
    } else if (name == "slice") {
      t = t.slice(op[1].to_number<std::int64_t>(), op[2].to_number<std::int64_t>(), op[3].to_number<std::int64_t>(),
                  op[4].to_number<std::int64_t>());
    } else if (name == "select") {
      t = t.select(op[1].to_number<std::int64_t>(), op[2].to_number<std::int64_t>());
    } else if (name == "requires_grad") {
      t = t.requires_grad_();
    } else if (name == "conj") {
      t = t.conj();
    } else if (name == "imag") {
      t = torch::imag(t);
    } else if (name == "names") {
      std::vector<at::Dimname> names;
      for (const auto& n : op[1].as_array())
        names.push_back(n.is_null() ? at::Dimname::wildcard()
                                    : at::Dimname::fromSymbol(at::Symbol::dimname(std::string(n.as_string()))));
      t = t.refine_names(names);
    } else if (name == "to_sparse") {
      t = t.to_sparse();
    } else if (name == "to_sparse_csr") {
      t = t.to_sparse_csr();
    } else if (name == "quantize_per_tensor") {
      t = torch::quantize_per_tensor(t, op[1].to_number<double>(), op[2].to_number<std::int64_t>(),
                                     dtype_named(op[3].as_string()));
    } else if (name == "quantize_per_channel") {
      std::vector<double> scales;
      for (const auto& s : op[1].as_array()) scales.push_back(s.to_number<double>());
      t = torch::quantize_per_channel(t, torch::tensor(scales, torch::kDouble), torch::tensor(int_list(op[2])),
                                      op[3].to_number<std::int64_t>(), dtype_named(op[4].as_string()));
    } else {
      throw std::runtime_error("unknown op " + std::string(name));
    }
  }
  return t;
}

// ---- minimal safetensors reader (one tensor per file) for the fixtures ----

c10::ScalarType safetensors_dtype(std::string_view name) {
  if (name == "F32") return torch::kFloat;
  if (name == "F64") return torch::kDouble;
  if (name == "F16") return torch::kHalf;
  if (name == "BF16") return torch::kBFloat16;
  if (name == "I64") return torch::kLong;
  if (name == "I32") return torch::kInt;
  if (name == "I16") return torch::kShort;
  if (name == "I8") return torch::kChar;
  if (name == "U8") return torch::kByte;
  if (name == "BOOL") return torch::kBool;
  throw std::runtime_error("unknown safetensors dtype " + std::string(name));
}

/// The file's one tensor (the first entry that is not __metadata__), or the named one.
torch::Tensor load_safetensors(const std::filesystem::path& path, std::string_view key = {}) {
  const std::string file = read_file(path);
  if (file.size() < 8) throw std::runtime_error("short safetensors file " + path.string());
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
  const auto header = json::parse(std::string_view(file).substr(8, header_len)).as_object();
  for (const auto& [name, entry_value] : header) {
    if (name == "__metadata__" || (!key.empty() && name != key)) continue;
    const auto& entry = entry_value.as_object();
    const auto offsets = int_list(entry.at("data_offsets"));
    const auto t = torch::empty(int_list(entry.at("shape")), safetensors_dtype(entry.at("dtype").as_string()));
    const auto begin = 8 + header_len + static_cast<std::uint64_t>(offsets[0]);
    const auto size = static_cast<std::size_t>(offsets[1] - offsets[0]);
    if (size != static_cast<std::size_t>(t.nbytes()) || begin + size > file.size())
      throw std::runtime_error("bad data_offsets in " + path.string());
    if (size != 0) std::memcpy(t.data_ptr(), file.data() + begin, size);
    return t;
  }
  throw std::runtime_error("no tensor in " + path.string());
}

// Walks the repr trace and the safetensors trace of the same run side by side; every tensor
// record ("value" lines in one, "./file.safetensors" in the other) is rebuilt and compared.
void compare_trace(const json::value& repr, const json::value& st, const std::filesystem::path& st_dir,
                   const std::string& where, int& checked) {
  if (repr.is_array() && st.is_array()) {
    const auto& a = repr.as_array();
    const auto& b = st.as_array();
    DOCTEST_REQUIRE_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) compare_trace(a[i], b[i], st_dir, where + "[" + std::to_string(i) + "]", checked);
    return;
  }
  if (!repr.is_object() || !st.is_object()) return;
  const auto& r = repr.as_object();
  const auto& s = st.as_object();
  if (r.contains("value") && r.at("value").is_array() && s.contains("value") && s.at("value").is_string()) {
    DOCTEST_INFO("record: " << where);
    const std::string file(s.at("value").as_string());
    const auto t = load_safetensors(st_dir / file.substr(2));
    DOCTEST_CHECK_EQ(joined(python_print_lines(t)), joined(string_list(r.at("value"))));
    DOCTEST_CHECK_EQ(python_shape_repr(t.sizes()), std::string(r.at("shape").as_string()));
    DOCTEST_CHECK_EQ(python_dtype_repr(t.scalar_type()), std::string(r.at("dtype").as_string()));
    c10::NoGradGuard no_grad;
    if (r.contains("mean")) DOCTEST_CHECK_EQ(python_repr(t.mean()), std::string(r.at("mean").as_string()));
    if (r.contains("std")) DOCTEST_CHECK_EQ(python_repr(t.std()), std::string(r.at("std").as_string()));
    if (r.contains("min")) DOCTEST_CHECK_EQ(python_repr(t.min()), std::string(r.at("min").as_string()));
    if (r.contains("max")) DOCTEST_CHECK_EQ(python_repr(t.max()), std::string(r.at("max").as_string()));
    ++checked;
    return;
  }
  for (const auto& [key, value] : r) {
    if (const auto* other = s.if_contains(key)) compare_trace(value, *other, st_dir, where + "." + std::string(key), checked);
  }
}

}  // namespace

DOCTEST_TEST_CASE("python_print_lines matches Python's print(tensor) for every recorded case") {
  const auto& cases = repr_cases().at("tensors").as_array();
  DOCTEST_REQUIRE(cases.size() > 100);
  for (const auto& case_value : cases) {
    const auto& c = case_value.as_object();
    const std::string name(c.at("name").as_string());
    DOCTEST_INFO("case: " << name);
    const auto t = build_tensor(c);
    const auto lines = python_print_lines(t);
    DOCTEST_CHECK_EQ(joined(lines), joined(string_list(c.at("lines"))));
    DOCTEST_CHECK_EQ(lines.size(), c.at("lines").as_array().size());
    DOCTEST_CHECK_EQ(python_repr(t), joined(lines));
    DOCTEST_CHECK_EQ(python_shape_repr(t.sizes()), std::string(c.at("shape_repr").as_string()));
    DOCTEST_CHECK_EQ(python_dtype_repr(t.scalar_type()), std::string(c.at("dtype_repr").as_string()));
    if (c.contains("stats")) {
      const auto& stats = c.at("stats").as_object();
      c10::NoGradGuard no_grad;
      DOCTEST_CHECK_EQ(python_repr(t.mean()), std::string(stats.at("mean").as_string()));
      DOCTEST_CHECK_EQ(python_repr(t.std()), std::string(stats.at("std").as_string()));
      DOCTEST_CHECK_EQ(python_repr(t.min()), std::string(stats.at("min").as_string()));
      DOCTEST_CHECK_EQ(python_repr(t.max()), std::string(stats.at("max").as_string()));
    }
  }
}

DOCTEST_TEST_CASE("python_repr(double) matches repr(float)") {
  const auto& cases = repr_cases().at("doubles").as_array();
  DOCTEST_REQUIRE(cases.size() > 100);
  for (const auto& case_value : cases) {
    const auto& c = case_value.as_object();
    const std::string bits(c.at("bits").as_string());
    DOCTEST_INFO("bits: " << bits);
    DOCTEST_CHECK_EQ(python_repr(double_from_hex(bits)), std::string(c.at("repr").as_string()));
  }
}

DOCTEST_TEST_CASE("python_repr(string) matches repr(str)") {
  const auto& cases = repr_cases().at("strings").as_array();
  DOCTEST_REQUIRE(cases.size() > 10);
  for (const auto& case_value : cases) {
    const auto& c = case_value.as_object();
    const std::string hex(c.at("utf8_hex").as_string());
    DOCTEST_INFO("utf-8 bytes: " << hex);
    DOCTEST_CHECK_EQ(python_repr(std::string_view(from_hex(hex))), std::string(c.at("repr").as_string()));
  }
}

DOCTEST_TEST_CASE("python_dtype_repr and python_shape_repr match str(dtype) and str(torch.Size)") {
  for (const auto& v : repr_cases().at("dtypes").as_array()) {
    const auto& c = v.as_object();
    DOCTEST_CHECK_EQ(python_dtype_repr(dtype_named(c.at("dtype").as_string())), std::string(c.at("repr").as_string()));
  }
  for (const auto& v : repr_cases().at("shapes").as_array()) {
    const auto& c = v.as_object();
    DOCTEST_CHECK_EQ(python_shape_repr(int_list(c.at("shape"))), std::string(c.at("repr").as_string()));
  }
}

DOCTEST_TEST_CASE("python_repr overloads resolve like the Python types they stand for") {
  DOCTEST_CHECK_EQ(python_repr(3), "3");
  DOCTEST_CHECK_EQ(python_repr(-7L), "-7");
  DOCTEST_CHECK_EQ(python_repr(std::int64_t{-9223372036854775807 - 1}), "-9223372036854775808");
  DOCTEST_CHECK_EQ(python_repr(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
  DOCTEST_CHECK_EQ(python_repr(static_cast<std::int8_t>(-5)), "-5");
  DOCTEST_CHECK_EQ(python_repr(static_cast<std::uint8_t>(200)), "200");
  DOCTEST_CHECK_EQ(python_repr(true), "True");
  DOCTEST_CHECK_EQ(python_repr(false), "False");
  DOCTEST_CHECK_EQ(python_repr(1.5f), "1.5");
  DOCTEST_CHECK_EQ(python_repr(0.1f), "0.10000000149011612");  // a float32 is a double to Python
  DOCTEST_CHECK_EQ(python_repr(3.0), "3.0");
  DOCTEST_CHECK_EQ(python_repr("it's"), "\"it's\"");
  DOCTEST_CHECK_EQ(python_repr(std::string("a\nb")), "'a\\nb'");
  DOCTEST_CHECK_EQ(python_repr(std::string_view("x")), "'x'");
  DOCTEST_CHECK_EQ(python_repr('q'), "'q'");
  DOCTEST_CHECK_EQ(python_repr(torch::Tensor()), "None");
  DOCTEST_CHECK_EQ(python_print_lines(torch::tensor(1.5)), std::vector<std::string>{"tensor(1.5000e+00)"});
}

DOCTEST_TEST_CASE("grad_fn names drop the C++ namespace") {
  const auto leaf = torch::ones({2, 3}).requires_grad_();
  DOCTEST_CHECK_EQ(python_repr(leaf.sum()), "tensor(6.0000e+00, grad_fn=<SumBackward0>)");
  DOCTEST_CHECK_EQ(python_repr(leaf + leaf).substr(0, 8), "tensor([");
  const auto sum = python_repr(leaf + leaf);
  DOCTEST_CHECK(sum.ends_with("grad_fn=<AddBackward0>)"));
}

DOCTEST_TEST_CASE("the tiny Llama input_ids print as in the Python trace") {
  const auto trace = json::parse(read_file(kData / "tiny_llama/trace_repr/LlamaModel_debug_tree_FULL_TENSORS.json"));
  const auto& arg = trace.at("inputs").at("args").as_array().at(0).as_object();
  const auto input_ids = load_safetensors(kData / "tiny_llama/input_ids.safetensors", "input_ids");
  DOCTEST_CHECK((input_ids.scalar_type() == torch::kLong));
  DOCTEST_CHECK_EQ(joined(python_print_lines(input_ids)), joined(string_list(arg.at("value"))));
  DOCTEST_CHECK_EQ(python_print_lines(input_ids), string_list(arg.at("value")));
  DOCTEST_CHECK_EQ(python_shape_repr(input_ids.sizes()), std::string(arg.at("shape").as_string()));
  DOCTEST_CHECK_EQ(python_dtype_repr(input_ids.scalar_type()), std::string(arg.at("dtype").as_string()));
}

DOCTEST_TEST_CASE("every tensor of the tiny Llama trace prints as in the Python trace") {
  const auto repr = json::parse(read_file(kData / "tiny_llama/trace_repr/LlamaModel_debug_tree_FULL_TENSORS.json"));
  const auto st = json::parse(read_file(kData / "tiny_llama/trace_st/LlamaModel_debug_tree_FULL_TENSORS.json"));
  int checked = 0;
  compare_trace(repr, st, kData / "tiny_llama/trace_st", "root", checked);
  DOCTEST_CHECK_GE(checked, 100);
}
