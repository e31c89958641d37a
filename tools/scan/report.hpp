#pragma once
/// \file
/// The report of tracetorch-scan-skipped: per common test, which models run and skip it and
/// why, as transformers' scan_skipped_tests.py writes it (its JSON schema, its printed totals).

#include <boost/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <tracetorch/detail/text/python_json.hpp>  // append_python_json
#include <tracetorch/testing/common_test_names.hpp>  // common_test_names

#include "common.hpp"
#include "tester_parser.hpp"

namespace tracetorch::scan_skipped {

namespace fs = std::filesystem;

struct TestSummary {
  std::vector<std::string> ran, skipped, reasons;  // sorted
};

inline TestSummary summarize(std::string_view test, const std::vector<ModelTests>& models) {
  TestSummary s;
  for (const auto& model : models) {
    const auto found = model.skipped.find(std::string(test));
    if (found == model.skipped.end()) {
      s.ran.push_back(model.model);
    } else {
      s.skipped.push_back(model.model);
      s.reasons.push_back(model.model + ": " + found->second);
    }
  }
  std::sort(s.ran.begin(), s.ran.end());
  std::sort(s.skipped.begin(), s.skipped.end());
  std::sort(s.reasons.begin(), s.reasons.end());
  return s;
}

/// Python's round(x, 4): the correctly rounded decimal (ties to even on the exact binary value,
/// as printf does), read back as a double.
inline double round4(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4f", x);
  return std::strtod(text, nullptr);
}

inline double proportion(std::size_t skipped, std::size_t total) {
  return total == 0 ? 0.0 : round4(static_cast<double>(skipped) / static_cast<double>(total));
}

inline boost::json::array json_strings(const std::vector<std::string>& items) {
  boost::json::array array;
  for (const auto& item : items) array.emplace_back(item);
  return array;
}

inline boost::json::object summary_json(const TestSummary& s, bool with_origin) {
  boost::json::object entry;
  if (with_origin) entry["origin"] = "common";
  entry["models_ran"] = json_strings(s.ran);
  entry["models_skipped"] = json_strings(s.skipped);
  entry["skipped_proportion"] = proportion(s.skipped.size(), s.ran.size() + s.skipped.size());
  entry["reasons_skipped"] = json_strings(s.reasons);
  return entry;
}

/// Written as Python's json.dump(data, f, indent=2) writes it.
inline fs::path write_json(const fs::path& path, const boost::json::object& data) {
  std::string text;
  tracetorch::detail::append_python_json(text, data, 0, false);
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw ScanError(path.string() + ": cannot write the file");
  return fs::absolute(path);
}

inline void print_counts(std::size_t ran, std::size_t skipped) {
  const std::size_t total = ran + skipped;
  const double percent = total == 0 ? 0.0 : 100.0 * static_cast<double>(skipped) / static_cast<double>(total);
  std::printf("Ran : %zu/%zu\n", ran, total);
  std::printf("Skipped : %zu/%zu (%.1f%%)\n", skipped, total, percent);
}

inline void print_reasons(const std::vector<std::string>& reasons) {
  constexpr std::size_t kShown = 10;
  for (std::size_t i = 0; i < reasons.size() && i < kShown; ++i) std::printf("- %s\n", reasons[i].c_str());
  if (reasons.size() > kShown) std::printf("- ... (%zu more in the JSON)\n", reasons.size() - kShown);
}

/// --test_method_name NAME: scan_<NAME>.json, without "origin", and the counts for that test.
inline void report_one_test(const std::string& test, const std::vector<ModelTests>& models, const fs::path& output_dir) {
  const auto summary = summarize(test, models);
  boost::json::object data;
  data[test] = summary_json(summary, /*with_origin=*/false);
  std::printf("== %s ==\n", test.c_str());
  print_counts(summary.ran.size(), summary.skipped.size());
  print_reasons(summary.reasons);
  const auto path = write_json(output_dir / ("scan_" + test + ".json"), data);
  std::printf("JSON saved to %s\n", path.string().c_str());
}

/// Every common test, by name: all_tests_scan_result.json, and the totals over (test, model) pairs.
inline void report_all_tests(const std::vector<ModelTests>& models, const fs::path& output_dir) {
  std::vector<std::string> tests(std::begin(tracetorch::testing::common_test_names),
                                 std::end(tracetorch::testing::common_test_names));
  std::sort(tests.begin(), tests.end());
  std::printf("Aggregating %zu tests...\n", tests.size());
  boost::json::object data;
  std::size_t ran = 0, skipped = 0;
  std::vector<std::string> reasons;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    std::printf("  (%zu/%zu) %s\n", i + 1, tests.size(), tests[i].c_str());
    const auto summary = summarize(tests[i], models);
    ran += summary.ran.size();
    skipped += summary.skipped.size();
    for (const auto& reason : summary.reasons) reasons.push_back(tests[i] + ": " + reason);
    data[tests[i]] = summary_json(summary, /*with_origin=*/true);
  }
  std::printf("== all %zu common tests, %zu models ==\n", tests.size(), models.size());
  print_counts(ran, skipped);
  print_reasons(reasons);
  const auto path = write_json(output_dir / "all_tests_scan_result.json", data);
  std::printf("JSON saved to %s\n", path.string().c_str());
}

}  // namespace tracetorch::scan_skipped
