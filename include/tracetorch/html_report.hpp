#pragma once
/// \file
/// A diff's (and a module replay's) report as one self-contained HTML page: the verdict and
/// counts, an error plot along execution order, the module tree coloured by status with each
/// node's values, and the replay's results. Inline style, script and SVG; nothing is fetched,
/// so the file opens from disk. Built from the JSON reports (`DiffReport::json()`, a replay's
/// array of calls), so it needs no LibTorch and serves reports read back from files too.
///
/// \code
/// const auto report = tracetorch::diff_traces("python_trace", "cpp_trace");
/// tracetorch::write_html_report("report.html", report.json());
/// \endcode
///
/// The parts, in include/tracetorch/detail/html/: markup.hpp (escaping), report_view.hpp (what
/// is read from a report), plot.hpp, module_tree.hpp, summary.hpp, replay.hpp, rows.hpp (the
/// value tables), assets.hpp (style and script), page.hpp (the page).

#include <boost/json.hpp>

#include <filesystem>
#include <string>

#include "tracetorch/detail/html/page.hpp"
#include "tracetorch/detail/fs/atomic_file.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch {

/// The HTML page of a diff report (`DiffReport::json()`, or such a JSON read back), with the
/// results of a module replay when `replay_report` is given: an array of calls, each an object
/// with `path`, `call`, `status` ("match", "diverges", "not_replayable"), `innermost`,
/// `reason`, and for a diverging call `max_abs`, `max_rel`, `elements_out_of_tolerance` (or an
/// object holding that array under "calls"). A null `diff_report` gives the replay's page alone.
/// Absent fields are left out of the page; a report that is not an object (a replay report
/// neither an array nor such an object) throws Error.
///
/// \code
/// boost::json::value replay = boost::json::parse(R"([{"path": "M.mlp", "call": 1, "status": "match"}])");
/// std::string page = tracetorch::html_report(nullptr, &replay);
/// \endcode
inline std::string html_report(const boost::json::value& diff_report, const boost::json::value* replay_report = nullptr) {
  return detail::html::render_report(diff_report, replay_report);
}

/// Writes html_report() to `path`, complete or not at all; throws Error naming the path.
///
/// \code
/// void save_report(const tracetorch::DiffReport& report) { tracetorch::write_html_report("diff.html", report.json()); }
/// \endcode
inline void write_html_report(const std::filesystem::path& path, const boost::json::value& diff_report,
                              const boost::json::value* replay_report = nullptr) {
  const std::string page = html_report(diff_report, replay_report);
  detail::AtomicFileWriter writer(path);
  writer.write(page);
  writer.commit();
}

}  // namespace tracetorch
