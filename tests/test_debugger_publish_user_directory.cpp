// A directory of the user's whose name is a trace file's name is never deleted (issue 37, item 6):
// the trace refuses, naming it, and debug_path keeps the previous trace; where the directory
// appears after that check (between it and the exchange), the publish keeps the replaced tree
// and says where. docs/reliability.md ("A trace is replaced whole") cites these tests.

#include "publish_helpers.hpp"
#include "test_helpers.hpp"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace tracetorch_user_directory_test {
namespace {

namespace fs = std::filesystem;
using Snapshot = std::map<std::string, std::string>;

struct UserDirNetImpl : torch::nn::Module {
  UserDirNetImpl() {
    torch::manual_seed(37);
    first = register_module("first", tracetorch::nn::Linear(3, 5));
    second = register_module("second", tracetorch::nn::Linear(5, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return second(torch::tanh(first(x))); }
  tracetorch::nn::Linear first{nullptr}, second{nullptr};
};
TRACETORCH_TRACEABLE_IMPL(UserDirNet, UserDirNetImpl);

torch::Tensor input_of(int generation) { return torch::full({2, 3}, generation / 4.0); }

tracetorch::DebuggerOptions options_for(const fs::path& dir, bool use_repr) {
  return {.debug_path = dir, .do_prune_layers = false, .use_repr = use_repr};
}

/// Generation `g` traced alone into a fresh directory.
Snapshot traced_alone(UserDirNet& model, int generation, bool use_repr) {
  tracetorch_test::TempDir dir;
  {
    auto scope = tracetorch::model_addition_debugger(model, options_for(dir.path(), use_repr));
    model(input_of(generation));
  }
  return tracetorch_test::snapshot(dir.path());
}

/// The trace file the test turns into the user's directory, in each trace kind.
std::string file_name_for(bool use_repr) {
  return use_repr ? "UserDirNet_debug_tree_SUMMARY.json" : "UserDirNet.second_inputs_args_0.safetensors";
}

/// Puts the user's directory, holding notes.txt, at `name` in `dbg` (removing a file there).
void make_user_directory(const fs::path& dbg, const std::string& name) {
  fs::remove(dbg / name);
  fs::create_directories(dbg / name / "inner");
  tracetorch_publish_test::put(dbg / name / "notes.txt", "the user's notes");
  tracetorch_publish_test::put(dbg / name / "inner" / "deep.txt", "deeper");
}

void check_user_directory(const fs::path& directory) {
  DOCTEST_CHECK(tracetorch_publish_test::slurp(directory / "notes.txt") == "the user's notes");
  DOCTEST_CHECK(tracetorch_publish_test::slurp(directory / "inner" / "deep.txt") == "deeper");
}

DOCTEST_TEST_SUITE("trace publish") {

DOCTEST_TEST_CASE("a user's directory named like a trace file: the trace refuses, naming it; the previous trace and the directory stay") {
  UserDirNet model;
  for (const bool use_repr : {false, true}) {
    DOCTEST_CAPTURE(use_repr);
    const std::string name = file_name_for(use_repr);
    tracetorch_test::TempDir parent;
    const auto dbg = parent / "dbg";
    auto scope = tracetorch::model_addition_debugger(model, options_for(dbg, use_repr));
    model(input_of(1));
    DOCTEST_REQUIRE(fs::is_regular_file(dbg / name));  // the name is one this trace writes

    make_user_directory(dbg, name);
    const Snapshot before = tracetorch_test::snapshot(dbg);
    const std::string expected = (fs::absolute(dbg) / name).string() + " is a directory";
    DOCTEST_CHECK_THROWS_WITH_AS(model(input_of(2)), doctest::Contains(expected.c_str()), tracetorch::Error);
    DOCTEST_CHECK_THROWS_WITH_AS(model(input_of(2)), doctest::Contains("is unchanged"), tracetorch::Error);
    DOCTEST_CHECK(tracetorch_test::snapshot(dbg) == before);  // the previous trace, the directory
    check_user_directory(dbg / name);
    DOCTEST_CHECK(tracetorch_publish_test::names_in(parent.path()) == std::set<std::string>{"dbg"});  // nothing beside

    // Moved away, the directory no longer stands in the way: the next forward is traced whole.
    fs::rename(dbg / name, dbg / "moved");
    model(input_of(3));
    Snapshot after = tracetorch_test::snapshot(dbg);
    DOCTEST_CHECK(after.erase("moved") == 1);
    check_user_directory(dbg / "moved");
    DOCTEST_CHECK(after == traced_alone(model, 3, use_repr));
  }
}

DOCTEST_TEST_CASE("a user's directory named like a trace file in a debug_path that holds no trace yet: refused, kept") {
  UserDirNet model;
  tracetorch_test::TempDir parent;
  const auto dbg = parent / "dbg";
  const std::string name = file_name_for(false);
  make_user_directory(dbg, name);
  auto scope = tracetorch::model_addition_debugger(model, options_for(dbg, false));
  DOCTEST_CHECK_THROWS_WITH_AS(model(input_of(1)), doctest::Contains((name + " is a directory").c_str()), tracetorch::Error);
  DOCTEST_CHECK(tracetorch_publish_test::names_in(dbg) == std::set<std::string>{name});
  check_user_directory(dbg / name);
  DOCTEST_CHECK(tracetorch_publish_test::names_in(parent.path()) == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("a user's directory named like a trace file where the trace goes file by file: refused, kept") {
  // debug_path is the process's working directory: no exchange, each file placed by rename,
  // which refuses to put a file over a directory. In a child, which alone changes directory.
  UserDirNet model;
  for (const bool use_repr : {false, true}) {
    DOCTEST_CAPTURE(use_repr);
    const std::string name = file_name_for(use_repr);
    tracetorch_test::TempDir parent;
    const auto dbg = parent / "dbg";
    {
      auto scope = tracetorch::model_addition_debugger(model, options_for(dbg, use_repr));
      model(input_of(1));
    }
    make_user_directory(dbg, name);
    const Snapshot before = tracetorch_test::snapshot(dbg);
    const auto child = tracetorch_publish_test::start_child([&](int out) {
      torch::set_num_threads(1);  // no thread pool in the child: the parent's does not exist here
      if (::chdir(dbg.c_str()) != 0) throw std::runtime_error("chdir failed");
      auto scope = tracetorch::model_addition_debugger(model, options_for(dbg, use_repr));
      try {
        model(input_of(2));
        tracetorch_publish_test::write_text(out, "no error");
      } catch (const tracetorch::Error& error) {
        tracetorch_publish_test::write_text(out, error.what());
      }
    });
    const std::string message = tracetorch_publish_test::read_all(child.out);
    ::close(child.out);
    DOCTEST_CHECK(tracetorch_publish_test::wait_for(child) == 0);
    DOCTEST_CHECK(message.find((dbg / name).string() + ": Is a directory") != std::string::npos);
    DOCTEST_CHECK(message.find("holds the previous trace, unchanged") != std::string::npos);
    DOCTEST_CHECK(tracetorch_test::snapshot(dbg) == before);
    check_user_directory(dbg / name);
  }
}

}  // DOCTEST_TEST_SUITE("trace publish")

/// For the injector, which takes no captures: where the directory appears, at the exchange.
fs::path g_appearing_directory;

int make_directory_at_exchange(std::string_view step) {
  if (step == "exchange" && !g_appearing_directory.empty()) {
    make_user_directory(g_appearing_directory.parent_path(), g_appearing_directory.filename().string());
    g_appearing_directory.clear();
  }
  return 0;
}

DOCTEST_TEST_SUITE("publish") {

DOCTEST_TEST_CASE("a directory made at a staged file's name just before the exchange: published, the replaced tree kept, the message says where") {
  tracetorch_publish_test::Scratch root;
  const auto dbg = root / "dbg";
  tracetorch_publish_test::publish_generation(dbg, "part", 1);
  g_appearing_directory = fs::absolute(dbg) / "part-2";
  tracetorch::detail::io_fault_injector = &make_directory_at_exchange;
  std::string message;
  try {
    tracetorch_publish_test::publish_generation(dbg, "part", 2);
  } catch (const tracetorch::Error& error) {
    message = error.what();
  }
  tracetorch::detail::io_fault_injector = nullptr;
  DOCTEST_CHECK(g_appearing_directory.empty());  // the injector ran
  DOCTEST_CHECK(message.find("part-2 is a directory, and the new tree has a file of that name") != std::string::npos);
  const auto at = message.find("the replaced tree is kept as ");
  DOCTEST_REQUIRE(at != std::string::npos);
  const fs::path kept = message.substr(at + std::string_view("the replaced tree is kept as ").size());
  DOCTEST_CHECK(kept.parent_path() == fs::absolute(root.path()));
  check_user_directory(kept / "part-2");
  DOCTEST_CHECK(tracetorch_publish_test::generation_of(dbg, "part") == 2);  // the new tree is published whole

  // Later publishes leave the kept tree alone.
  tracetorch_publish_test::publish_generation(dbg, "part", 3);
  DOCTEST_CHECK(tracetorch_publish_test::generation_of(dbg, "part") == 3);
  check_user_directory(kept / "part-2");
}

}  // DOCTEST_TEST_SUITE("publish")

}  // namespace
}  // namespace tracetorch_user_directory_test
