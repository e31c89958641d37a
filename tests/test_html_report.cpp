// include/tracetorch/html_report.hpp and tracetorch-diff --html: the page of a diverging tiny
// trace (summary, plot, tree), text escaped, kinds and counts the page does not know shown, a
// replay report with and without a diff, the markup checked by tests/html_report_check.py
// (well-formed as XML, HTML's rules, nothing fetched), and the page rendered by headless
// chromium: its script ran, the plot and the tree are in the DOM, the screenshot is not blank.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>
#include <tracetorch/html_report.hpp>

#include "diff_helpers.hpp"

#include <chrono>
#include <csignal>
#include <thread>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

namespace html_report_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::TempDir;

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

/// The page of the tiny Llama against its reference with a wrong epsilon in layer 2.
tracetorch::DiffReport diverging_tiny_report() {
  return tracetorch::diff_traces(tracetorch_test::planted("eps_layer2"), tracetorch_test::tiny() / "trace_st");
}

const fs::path kChecker = tracetorch_test::data_dir().parent_path() / "html_report_check.py";

/// tests/html_report_check.py's verdict on a file; skipped (true) without python3.
bool checker_passes(const std::string& arguments) {
  if (!fs::exists("/usr/bin/python3")) {
    DOCTEST_MESSAGE("skipped: /usr/bin/python3 is missing, the markup and PNG checks need it");
    return true;
  }
  const auto result = tracetorch_test::run_program("/usr/bin/python3", kChecker.string() + " " + arguments);
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  return result.exit_code == 0;
}

/// A hand-made replay report: a diverging leaf (innermost), its diverging parent, a call that
/// could not be replayed, and matches.
boost::json::value replay_report() {
  return boost::json::parse(R"([
    {"path": "LlamaModel.layers.2", "call": 1, "status": "diverges", "innermost": false, "reason": "",
     "max_abs": 0.5, "max_rel": 3.0, "elements_out_of_tolerance": 448},
    {"path": "LlamaModel.layers.2.post_attention_layernorm", "call": 1, "status": "diverges", "innermost": true, "reason": "",
     "max_abs": 0.25, "max_rel": 1.5, "elements_out_of_tolerance": 224},
    {"path": "LlamaModel.layers.0.self_attn", "call": 1, "status": "not_replayable", "innermost": false,
     "reason": "past_key_values: a DynamicCache <object> cannot be rebuilt; replay it with an empty cache"},
    {"path": "LlamaModel.layers.0.mlp", "call": 1, "status": "match", "innermost": false, "reason": ""},
    {"path": "LlamaModel.norm", "call": 1, "status": "match", "innermost": false, "reason": ""}])");
}

/// Runs `arguments` (argv[0] the program) in a process group of its own, stdout into `stdout_file`;
/// after `limit` the group is killed by its id. Returns the exit code, or -1 if killed.
int run_bounded(const std::vector<std::string>& arguments, const fs::path& stdout_file, std::chrono::seconds limit) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group: its helper processes end with it
  std::vector<char*> argv;
  for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &files, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) return -1;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(-pid, SIGKILL);  // the group: a timed-out browser, or helpers left behind by one that exited
  if (done == 0) {
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Headless chromium on `page`: `mode` "--dump-dom" (into `out`) or "--screenshot=<out>".
int run_chromium(const fs::path& page, const std::string& mode, const fs::path& out, const fs::path& profile) {
  std::vector<std::string> arguments{"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                                     "--no-first-run", "--disable-background-networking", "--disable-component-update",
                                     "--disable-sync", "--user-data-dir=" + profile.string(), "--window-size=1200,1600"};
  arguments.push_back(mode == "--dump-dom" ? mode : "--screenshot=" + out.string());
  arguments.push_back("file://" + page.string());
  // Chromium starts in seconds; minutes are for a machine busy with builds.
  return run_bounded(arguments, mode == "--dump-dom" ? out : fs::path(out.string() + ".stdout"), std::chrono::seconds(180));
}

}  // namespace

DOCTEST_TEST_SUITE("html report") {

DOCTEST_TEST_CASE("a diverging tiny trace: the summary, the plot along execution order and the module tree") {
  const auto report = diverging_tiny_report();
  const auto json = report.json();
  const std::string page = tracetorch::html_report(json);

  DOCTEST_CHECK(contains(page, "<p class=\"verdict s-diverges\">Diverges"));
  for (const auto kind : tracetorch::kDiffKinds) DOCTEST_CHECK(contains(page, std::string("<td>") + to_string(kind) + "</td>"));
  // The first divergence: named in the summary with a link to its node, marked on the plot, its node open.
  const auto& first = report.tensors.at(report.first_divergence.value());
  DOCTEST_CHECK(first.module_path == "LlamaModel.layers.2.post_attention_layernorm");
  DOCTEST_CHECK(contains(page, "first divergence: " + first.module_path + "</text>"));
  const auto node_at = page.find("data-path=\"" + first.module_path + "\" open=\"open\">");
  DOCTEST_REQUIRE(node_at != std::string::npos);
  const std::string node_id = page.substr(page.rfind("id=\"", node_at) + 4, page.find('"', page.rfind("id=\"", node_at) + 4) - page.rfind("id=\"", node_at) - 4);
  DOCTEST_CHECK(contains(page, "First divergence: <a href=\"#" + node_id + "\">" + first.module_path + "</a>"));

  // One tree node per module path, one plot point per module call with compared values.
  std::set<std::string> paths;
  std::set<std::pair<std::string, std::size_t>> calls_compared;
  for (const auto& t : report.tensors) {
    paths.insert(t.module_path);
    if (t.compared > 0) calls_compared.insert({t.module_path, t.call});
  }
  DOCTEST_CHECK(occurrences(page, "<details class=\"node ") == paths.size());
  const auto abs_points = page.substr(page.find("<path class=\"pt pt-abs\" d=\""));
  DOCTEST_CHECK(occurrences(abs_points.substr(0, abs_points.find("/>")), "h0") == calls_compared.size());
  DOCTEST_CHECK(contains(page, "<path class=\"tol tol-abs\""));
  DOCTEST_CHECK(contains(page, "<path class=\"tick s-diverges\""));
  // The values are in the data for the script, not in the markup: the node's rows under its id.
  const auto rows_at = page.find("\"" + node_id + "\":[[");
  DOCTEST_REQUIRE(rows_at != std::string::npos);
  DOCTEST_CHECK(page.find("[\"diverges\",\"1\",\"outputs\",\"out of tolerance [values]\"", rows_at) < page.find("]]", rows_at));

  TempDir dir;
  tracetorch::write_html_report(dir / "report.html", json);
  DOCTEST_CHECK(tracetorch_test::read_file(dir / "report.html") == page);
  checker_passes("markup " + (dir / "report.html").string());
}

DOCTEST_TEST_CASE("user text is escaped; kinds and counts the page does not know are shown") {
  const std::string path = "M.<script>alert(1)</script>&\"'\x01\xff";
  boost::json::object report{{"within_tolerance", false}, {"atol", 1e-5}, {"rtol", 1e-4}};
  report["differences"] = {{"by_kind", {{"values", 0}, {"order", 2}}}, {"overwritten", 3}, {"not_accepted", 2}};
  report["first_divergence"] = {{"module_path", path}, {"call", 2}, {"location", "outputs</script>"}, {"status", "order"}};
  report["tensors"] = boost::json::array{
      {{"module_path", "M"}, {"call", 1}, {"location", "outputs"}, {"status", "ok"}, {"kind", nullptr}, {"compared", 4},
       {"max_abs_error", 0.0}, {"max_rel_error", 0.0}},
      {{"module_path", path}, {"call", 2}, {"location", "outputs</script>"}, {"status", "order"}, {"kind", "order"},
       {"reference_order", "a, b"}, {"candidate_order", "b, a"}, {"compared", 4}, {"max_abs_error", "nan"}, {"max_rel_error", "inf"}}};
  const std::string page = tracetorch::html_report(report);

  DOCTEST_CHECK(!contains(page, "<script>alert"));
  DOCTEST_CHECK(occurrences(page, "</script>") == 2);  // the data block's and the script's own
  DOCTEST_CHECK(contains(page, "M.&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;\\x01\xEF\xBF\xBD"));
  DOCTEST_CHECK(contains(page, "<tr class=\"s-count\"><td>order</td><td>2</td></tr>"));
  DOCTEST_CHECK(contains(page, "<td>overwritten</td><td>3</td>"));
  // A field the value table has no column for is shown by name: the two orders of an `order` difference.
  DOCTEST_CHECK(contains(page, "reference_order=a, b; candidate_order=b, a"));
  DOCTEST_CHECK(contains(page, "first divergence: M.&lt;script&gt;"));
  TempDir dir;
  tracetorch::write_html_report(dir / "escaped.html", report);
  checker_passes("markup " + (dir / "escaped.html").string());

  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::html_report(boost::json::array{}), doctest::Contains("the diff report is not a JSON object"),
                               tracetorch::Error);
  const boost::json::value not_calls = 3;
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::html_report(nullptr, &not_calls), doctest::Contains("the replay report is neither"),
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::write_html_report(dir / "missing" / "x.html", report),
                               doctest::Contains((dir / "missing" / "x.html").c_str()), tracetorch::Error);
}

DOCTEST_TEST_CASE("a replay report: with the diff, and alone") {
  const auto replay = replay_report();
  const std::string page = tracetorch::html_report(diverging_tiny_report().json(), &replay);
  const std::string section = page.substr(page.find("<section id=\"replay\">"));
  DOCTEST_CHECK(contains(section, "5 calls: 2 diverges (1 innermost), 1 not_replayable, 2 match"));
  // Innermost first: the leaf that explains its parent is listed above it.
  const auto leaf = section.find(">LlamaModel.layers.2.post_attention_layernorm</a>");
  const auto parent = section.find(">LlamaModel.layers.2</a>");
  DOCTEST_CHECK(leaf < parent);
  DOCTEST_CHECK(parent != std::string::npos);
  DOCTEST_CHECK(contains(section, "a DynamicCache &lt;object&gt; cannot be rebuilt; replay it with an empty cache"));
  DOCTEST_CHECK(contains(page, "\"replay-other\":[[\"ok\",\"LlamaModel.layers.0.mlp\""));
  DOCTEST_CHECK(occurrences(page, "replay: diverges</span>") == 2);
  DOCTEST_CHECK(occurrences(page, "replay: not replayable</span>") == 1);

  const std::string alone = tracetorch::html_report(nullptr, &replay);
  DOCTEST_CHECK(contains(alone, "<title>tracetorch replay: diverges</title>"));
  DOCTEST_CHECK(!contains(alone, "<section id=\"summary\">"));
  DOCTEST_CHECK(occurrences(alone, "<details class=\"node ") == 5);
  const auto points = alone.substr(alone.find("<path class=\"pt pt-abs\" d=\""));
  DOCTEST_CHECK(occurrences(points.substr(0, points.find("/>")), "h0") == 2);  // the two calls with errors
  // The plot marks the first innermost diverging call: the one that explains its parent.
  DOCTEST_CHECK(contains(alone, "first divergence: LlamaModel.layers.2.post_attention_layernorm</text>"));
  TempDir dir;
  tracetorch::write_html_report(dir / "both.html", diverging_tiny_report().json(), &replay);
  tracetorch::write_html_report(dir / "alone.html", nullptr, &replay);
  checker_passes("markup " + (dir / "both.html").string());
  checker_passes("markup " + (dir / "alone.html").string());
}

#ifdef TRACETORCH_DIFF
DOCTEST_TEST_CASE("tracetorch-diff --html writes the page beside its exit status") {
  TempDir dir;
  const auto result = tracetorch_test::run_diff(tracetorch_test::planted("eps_layer2").string() + " " +
                                                (tracetorch_test::tiny() / "trace_st").string() + " --html " + (dir / "r.html").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  const std::string page = tracetorch_test::read_file(dir / "r.html");
  DOCTEST_CHECK(page == tracetorch::html_report(diverging_tiny_report().json()));
  const auto same = tracetorch_test::run_diff((tracetorch_test::tiny() / "trace_st").string() + " " +
                                              (tracetorch_test::tiny() / "trace_st").string() + " --html " + (dir / "same.html").string());
  DOCTEST_CHECK(same.exit_code == 0);
  DOCTEST_CHECK(contains(tracetorch_test::read_file(dir / "same.html"), "<p class=\"verdict s-ok\">Within tolerance</p>"));
}
#endif

DOCTEST_TEST_CASE("headless chromium renders the page: the script ran, the plot, the tree and the replay are drawn") {
  if (!fs::exists("/usr/bin/chromium")) {
    DOCTEST_MESSAGE("skipped: /usr/bin/chromium is missing (Debian package chromium)");
    return;
  }
  TempDir dir;
  const auto report = diverging_tiny_report();
  const auto replay = replay_report();
  tracetorch::write_html_report(dir / "report.html", report.json(), &replay);
  DOCTEST_REQUIRE(run_chromium(dir / "report.html", "--dump-dom", dir / "dom.html", dir / "profile-dom") == 0);
  const std::string dom = tracetorch_test::read_file(dir / "dom.html");
  DOCTEST_INFO(dom.substr(0, 2000));
  DOCTEST_CHECK(contains(dom, "<body data-script-ms=\""));  // the script's last lines ran
  DOCTEST_CHECK(contains(dom, "\" data-ready=\""));
  DOCTEST_CHECK(contains(dom, "<path class=\"pt pt-abs\" d=\"M"));
  DOCTEST_CHECK(contains(dom, "<path class=\"first\""));
  std::set<std::string> paths;
  for (const auto& t : report.tensors) paths.insert(t.module_path);
  DOCTEST_CHECK(occurrences(dom, "<details class=\"node ") == paths.size());
  // The script built the first divergence's value table (the markup holds none).
  DOCTEST_CHECK(occurrences(dom, "<tr class=\"s-diverges\"><td>1</td><td>outputs</td><td>out of tolerance [values]</td>") == 1);
  // The replay's diverging calls are listed; its other calls' table is built only when opened.
  DOCTEST_CHECK(contains(dom, "<h3>Diverging calls, innermost first</h3>"));
  DOCTEST_CHECK(contains(dom, "data-rows=\"replay-other\" data-head=\"replay\"></div>"));

  DOCTEST_REQUIRE(run_chromium(dir / "report.html", "--screenshot", dir / "shot.png", dir / "profile-shot") == 0);
  // Not a blank page: many colours, among them the verdict's and the diverging ticks' red and the abs series' blue.
  checker_passes("png " + (dir / "shot.png").string() + " c62828 1565c0");
}

}  // DOCTEST_TEST_SUITE
}  // namespace html_report_test
