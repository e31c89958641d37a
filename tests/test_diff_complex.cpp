// include/tracetorch/diff.hpp and tools/tracetorch_diff.cpp on complex tensors (issue 26, item 5):
// traces the debugger writes of a small model with complex64 and complex128 values, both kinds
// (use_repr=true: printed `1.0000+2.j`; use_repr=false: `C64` files), diffed against themselves
// and against a run whose imaginary parts moved; a complex value against a real one; and the
// refusals (exit 2, the dtype named) of what cannot be read back.

#include <doctest/doctest.h>

#include <tracetorch/detail/trace_format/printed_numbers.hpp>
#include <tracetorch/diff.hpp>
#include <tracetorch/tracetorch.hpp>

#include "test_helpers.hpp"

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using tracetorch::DiffStatus;
using tracetorch_test::TempDir;

/// A leaf turning magnitudes and angles into complex64 values, plus `shift` (a bug to find).
struct PolarImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto z = torch::polar(x.abs() + 1, x * 3);
    return shift == c10::complex<double>(0, 0) ? z : z + c10::Scalar(shift);
  }
  c10::complex<double> shift{0, 0};
};
TRACETORCH_TRACEABLE(Polar);

/// A leaf widening complex64 to complex128 (which safetensors cannot hold).
struct WidenImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor z) { return z.to(torch::kComplexDouble) * 2; }
};
TRACETORCH_TRACEABLE(Widen);

/// Spectrum -> polar (complex64), then -> widen (complex128) where `wide`.
struct SpectrumImpl : torch::nn::Module {
  explicit SpectrumImpl(bool wide) {
    polar = register_module("polar", Polar());
    if (wide) widen = register_module("widen", Widen());
  }
  torch::Tensor forward(torch::Tensor x) {
    auto z = polar(x);
    return widen.is_empty() ? z : widen(z);
  }
  Polar polar{nullptr};
  Widen widen{nullptr};
};
TRACETORCH_TRACEABLE(Spectrum);

struct EchoImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
TRACETORCH_TRACEABLE(Echo);

struct CarryImpl : torch::nn::Module {  // Carry -> Carry.echo, as Python's `Kinds` in make_trace_kinds.py
  CarryImpl() { echo = register_module("echo", Echo()); }
  torch::Tensor forward(torch::Tensor x) { return echo(x); }
  Echo echo{nullptr};
};
TRACETORCH_TRACEABLE(Carry);

/// Traces Spectrum on 6 numbers into `dir`: complex128 too where `wide` (use_repr=true only).
fs::path trace(const fs::path& dir, bool use_repr, bool wide, c10::complex<double> shift = {0, 0}) {
  Spectrum model(wide);
  model->polar->shift = shift;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .use_repr = use_repr});
  model(torch::linspace(-1, 1, 6).reshape({2, 3}));
  return dir;
}

const tracetorch::TensorDiff& value_at(const tracetorch::DiffReport& report, const std::string& where) {
  for (const auto& t : report.tensors) {
    if (t.where() == where) return t;
  }
  throw std::runtime_error("no value " + where + " in the report");
}

using tracetorch_test::contains;

using tracetorch_test::read_file;

/// A one-call use_repr=true trace "M" -> "M.f" whose output is `lines` of `dtype`, shape [1].
fs::path printed_trace(const fs::path& dir, const std::string& dtype, const std::string& line) {
  const boost::json::object value{{"shape", "torch.Size([1])"}, {"dtype", dtype}, {"value", boost::json::array{line}}};
  const boost::json::object leaf{{"module_path", "M.f"}, {"inputs", {{"args", boost::json::array{value}}}}, {"outputs", value}};
  const boost::json::object root{{"module_path", "M"}, {"inputs", {{"args", boost::json::array{}}}},
                                 {"children", boost::json::array{leaf}}};
  fs::create_directories(dir);
  std::ofstream(dir / "M_debug_tree_FULL_TENSORS.json") << boost::json::serialize(root);
  return dir;
}

}  // namespace

DOCTEST_TEST_SUITE("diff complex") {

DOCTEST_TEST_CASE("Python's print of a complex tensor is read as real and imaginary parts, each with its printed precision") {
  // torch.tensor([1+2j, -3.5-4j, nan+1j, complex(inf, -inf)]) and a complex128 one in scientific notation.
  std::vector<tracetorch::detail::PrintedNumber> n;
  DOCTEST_REQUIRE(tracetorch::detail::parse_printed_numbers({"tensor([ 1.0000+2.j, -3.5000-4.j,     nan+1.j,     inf-infj])"}, n));
  DOCTEST_REQUIRE(n.size() == 8);
  DOCTEST_CHECK((n[0].value == 1.0 && std::fabs(n[0].half_unit - 5e-5) < 1e-15 && n[1].value == 2.0 && n[1].half_unit == 0));
  DOCTEST_CHECK((n[2].value == -3.5 && n[3].value == -4.0));
  DOCTEST_CHECK((std::isnan(n[4].value) && n[5].value == 1.0));
  DOCTEST_CHECK((n[6].value == HUGE_VAL && n[7].value == -HUGE_VAL));
  DOCTEST_REQUIRE(tracetorch::detail::parse_printed_numbers({"tensor([1.0000e-08+2.0000e+00j, 3.0000e+09-4.0000e-05j],",
                                                             "       dtype=torch.complex128)"},
                                                            n));
  DOCTEST_REQUIRE(n.size() == 4);
  DOCTEST_CHECK((n[0].value == 1e-8 && n[1].value == 2.0 && n[2].value == 3e9 && n[3].value == -4e-5));
  DOCTEST_CHECK(std::fabs(n[3].half_unit - 5e-10) < 1e-20);  // half a unit of the last digit, 1e-9
  DOCTEST_CHECK(tracetorch::detail::parse_printed_numbers({"tensor(1.+2.j)"}, n));
  DOCTEST_CHECK(n.size() == 2);
  // A 'j' stands only right after a number: anything else is not a printed tensor.
  for (const char* bad : {"tensor([1.0000+2.0000i])", "tensor([1.0000+j])", "tensor([j])", "tensor([1.+2.jj])", "tensor([1. j])"}) {
    DOCTEST_INFO(bad);
    DOCTEST_CHECK_FALSE(tracetorch::detail::parse_printed_numbers({bad}, n));
  }
}

DOCTEST_TEST_CASE("complex64 and complex128 printed (use_repr=true): a trace agrees with itself, moved imaginary parts are found") {
  TempDir dir;
  const auto ref = trace(dir / "ref", true, true);
  const auto cand = trace(dir / "cand", true, true, {0, 0.01});
  DOCTEST_REQUIRE(contains(read_file(ref / "Spectrum_debug_tree_FULL_TENSORS.json"), "j"));  // printed as Python prints complex

  auto report = tracetorch::diff_traces(ref, ref);
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  for (const auto* where : {"Spectrum.polar outputs", "Spectrum.widen inputs.args.0", "Spectrum.widen outputs"}) {
    const auto& t = value_at(report, where);
    DOCTEST_INFO(where);
    DOCTEST_CHECK(t.status == DiffStatus::within_tolerance);
    DOCTEST_CHECK(t.printed);
    DOCTEST_CHECK(t.compared == 12);  // 6 elements, a real and an imaginary part each
  }
  DOCTEST_CHECK(value_at(report, "Spectrum.widen outputs").reference_dtype == "torch.complex128");

  report = tracetorch::diff_traces(ref, cand);
  const auto text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_CHECK_FALSE(report.within_tolerance());
  DOCTEST_REQUIRE(report.first_divergence.has_value());
  DOCTEST_CHECK(report.tensors[*report.first_divergence].where() == "Spectrum.polar outputs");
  for (const auto* where : {"Spectrum.polar outputs", "Spectrum.widen outputs"}) {
    const auto& t = value_at(report, where);
    DOCTEST_INFO(where);
    DOCTEST_CHECK(t.status == DiffStatus::out_of_tolerance);
    DOCTEST_CHECK(t.out_of_tolerance == 6);  // the imaginary parts only
  }
  const auto& polar = value_at(report, "Spectrum.polar outputs");
  DOCTEST_CHECK(polar.max_abs_error > 0.0098);
  DOCTEST_CHECK(polar.max_abs_error < 0.0102);  // 0.01, give or take the printed digits
  DOCTEST_CHECK(value_at(report, "Spectrum.widen outputs").max_abs_error > 0.0198);  // doubled by widen
  DOCTEST_CHECK(contains(text, "out of tolerance: 6 of 12 printed values, max abs error"));

#ifdef TRACETORCH_DIFF
  auto result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + ref.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + cand.string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "first divergence: Spectrum.polar outputs"));
#endif
}

DOCTEST_TEST_CASE("complex64 files (use_repr=false): a trace agrees with itself, moved imaginary parts are found, tolerance applies") {
  TempDir dir;
  const auto ref = trace(dir / "ref", false, false);
  const auto cand = trace(dir / "cand", false, false, {0, 0.01});
  const auto close = trace(dir / "close", false, false, {0, 1e-6});  // within atol 1e-5
  DOCTEST_REQUIRE(fs::exists(ref / "Spectrum.polar_outputs.safetensors"));

  auto report = tracetorch::diff_traces(ref, ref);
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.reference_values == "safetensors");
  for (const auto* where : {"Spectrum.polar outputs", "Spectrum outputs"}) {  // the root's output: its file only
    const auto& t = value_at(report, where);
    DOCTEST_INFO(where);
    DOCTEST_CHECK(t.status == DiffStatus::within_tolerance);
    DOCTEST_CHECK_FALSE(t.printed);
    DOCTEST_CHECK(t.compared == 12);
    DOCTEST_CHECK(t.max_abs_error == 0);
    DOCTEST_CHECK(t.cosine_similarity == doctest::Approx(1.0));
  }

  report = tracetorch::diff_traces(ref, close);
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(value_at(report, "Spectrum.polar outputs").max_abs_error > 0);  // seen, and within tolerance

  report = tracetorch::diff_traces(ref, cand);
  const auto text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_REQUIRE(report.first_divergence.has_value());
  DOCTEST_CHECK(report.tensors[*report.first_divergence].where() == "Spectrum.polar outputs");
  const auto& polar = value_at(report, "Spectrum.polar outputs");
  DOCTEST_CHECK(polar.status == DiffStatus::out_of_tolerance);
  DOCTEST_CHECK(polar.out_of_tolerance == 6);
  DOCTEST_CHECK(polar.max_abs_error == doctest::Approx(0.01).epsilon(1e-4));
  DOCTEST_CHECK(contains(text, "out of tolerance: 6 of 12 real and imaginary parts, max abs error"));

#ifdef TRACETORCH_DIFF
  auto result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + ref.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + cand.string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "first divergence: Spectrum.polar outputs"));
#endif
}

DOCTEST_TEST_CASE("complex across trace kinds and dtypes: files against printed values agree; complex against real is a dtype mismatch") {
  TempDir dir;
  const auto files = trace(dir / "files", false, false);
  const auto printed = trace(dir / "printed", true, false);
  auto report = tracetorch::diff_traces(files, printed);
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  const auto& polar = value_at(report, "Spectrum.polar outputs");
  DOCTEST_CHECK((polar.printed && polar.compared == 12 && polar.status == DiffStatus::within_tolerance));

  // 1+2j against 1 and 2 as two reals, and complex64 against complex128: not compared, reported.
  const auto complex = printed_trace(dir / "c64", "torch.complex64", "tensor([1.0000+2.j])");
  const auto wide = printed_trace(dir / "c128", "torch.complex128", "tensor([1.0000+2.j], dtype=torch.complex128)");
  const auto real = printed_trace(dir / "f32", "torch.float32", "tensor([1.0000])");
  report = tracetorch::diff_traces(complex, real);
  DOCTEST_CHECK(value_at(report, "M.f outputs").status == DiffStatus::dtype_mismatch);
  report = tracetorch::diff_traces(complex, wide);
  DOCTEST_CHECK(value_at(report, "M.f outputs").status == DiffStatus::dtype_mismatch);
  DOCTEST_CHECK(contains(report.text(), "dtype mismatch: reference torch.complex64, candidate torch.complex128"));
  // complex32 (printed only) against complex64 is compared, at half precision's tolerance.
  const auto half = printed_trace(dir / "c32", "torch.complex32", "tensor([1.0000+2.j], dtype=torch.complex32)");
  report = tracetorch::diff_traces(complex, half);
  const auto& across = value_at(report, "M.f outputs");
  DOCTEST_CHECK((across.status == DiffStatus::within_tolerance && across.across_dtypes() && across.atol == 0x1p-9));
  // Special values as Python prints them: nan and inf in either part.
  const auto special = printed_trace(dir / "nan", "torch.complex64", "tensor([nan+infj])");
  report = tracetorch::diff_traces(special, special);
  DOCTEST_CHECK((value_at(report, "M.f outputs").compared == 2 && report.within_tolerance()));
}

DOCTEST_TEST_CASE("every dtype the debugger writes is diffed against itself, in both trace kinds") {
  const auto values = torch::tensor({-2.5, 0.0, 1.0, 3.0, 7.0, 100.0}).reshape({2, 3});
  std::size_t diffed = 0;
  for (const auto type : {torch::kFloat, torch::kHalf, torch::kBFloat16, torch::kDouble, torch::kLong, torch::kInt, torch::kShort,
                          torch::kChar, torch::kByte, torch::kBool, torch::kComplexHalf, torch::kComplexFloat, torch::kComplexDouble}) {
    // safetensors holds no complex32 or complex128: those are traced with use_repr=true only.
    const bool files = type != torch::kComplexHalf && type != torch::kComplexDouble;
    for (const bool use_repr : {true, false}) {
      if (!use_repr && !files) continue;
      const auto input = type == torch::kByte ? values.abs().to(type) : values.to(type);
      DOCTEST_INFO(c10::toString(type) << (use_repr ? " printed" : " files"));
      TempDir dir;
      Carry model;
      {
        auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = use_repr});
        model(input);
      }
      const auto report = tracetorch::diff_traces(dir.path(), dir.path());
      DOCTEST_CHECK(report.within_tolerance());
      const auto& echo = value_at(report, "Carry.echo outputs");
      DOCTEST_CHECK(echo.status == DiffStatus::within_tolerance);
      DOCTEST_CHECK(echo.compared >= (input.is_complex() ? 12 : 6));
      ++diffed;
    }
  }
  DOCTEST_CHECK(diffed == 24);
}

DOCTEST_TEST_CASE("complex values that cannot be read back are refused with exit 2, naming the dtype") {
  TempDir dir;
  // Not Python's print of a complex tensor ('i' for 'j'): refused, not misread.
  const auto odd = printed_trace(dir / "odd", "torch.complex64", "tensor([1.0000+2.0000i])");
  const auto good = printed_trace(dir / "good", "torch.complex64", "tensor([1.0000+2.0000j])");
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::diff_traces(good, odd),
                               doctest::Contains("M.f inputs.args.0: value is not a printed tensor (tensor([1.0000+2.0000i])), "
                                                 "dtype torch.complex64"),
                               tracetorch::Error);
  // A file whose header names a dtype the reader does not know.
  const auto files = trace(dir / "files", false, false);
  const auto copy = dir / "spoiled";
  fs::copy(files, copy, fs::copy_options::recursive);
  const auto file = copy / "Spectrum.polar_outputs.safetensors";
  std::string bytes = read_file(file);
  const auto at = bytes.find("\"C64\"");
  DOCTEST_REQUIRE(at != std::string::npos);
  bytes.replace(at, 5, "\"C32\"");
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::diff_traces(files, copy), doctest::Contains("unknown dtype \"C32\""), tracetorch::Error);

#ifdef TRACETORCH_DIFF
  auto result = tracetorch_test::run_program(TRACETORCH_DIFF, good.string() + " " + odd.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, "dtype torch.complex64"));
  result = tracetorch_test::run_program(TRACETORCH_DIFF, files.string() + " " + copy.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, "Spectrum.polar_outputs.safetensors"));
  DOCTEST_CHECK(contains(result.output, "unknown dtype \"C32\""));
#endif
}

}  // DOCTEST_TEST_SUITE
