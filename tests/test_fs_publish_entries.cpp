// Whole-tree replacement of a trace directory (issue 26, item 1): detail/fs/publish.hpp keeps the
// other entries of debug_path (a user's file, link and directory, another model's files) and its
// permissions, and the replaced tree can be kept as spares and staged again. docs/reliability.md
// ("A trace is replaced whole") lists each promise and the test that proves it.

#include <doctest/doctest.h>
#include <tracetorch/detail/fs/publish.hpp>
#include <tracetorch/detail/fs/staged_directory.hpp>

#include "publish_helpers.hpp"

#include <sys/stat.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace tracetorch_publish_test {
namespace {

DOCTEST_TEST_SUITE("publish") {

DOCTEST_TEST_CASE("other entries of debug_path survive a publish - a predicate drops the replaced model's stale files") {
  Scratch root;
  const auto dbg = root / "dbg";
  add_user_entries(dbg);
  fs::create_symlink("user.txt", dbg / "link");
  put(dbg / "Other_debug_tree_SUMMARY.json", "other model");
  put(dbg / "M_debug_tree_SUMMARY.json", "old");
  put(dbg / "M.stale_inputs_args_0.safetensors", "stale");
  fs::permissions(dbg, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  struct stat user_before {};
  DOCTEST_REQUIRE(::stat((dbg / "user.txt").c_str(), &user_before) == 0);

  std::optional<StagedDirectory> replaced;
  {
    StagedDirectory staged(dbg);
    put(staged.path() / "M_debug_tree_SUMMARY.json", "new");
    put(staged.path() / "M.fresh_inputs_args_0.safetensors", "fresh");
    replaced = tracetorch::detail::publish(std::move(staged));
  }
  // Everything but the replaced file stays, the stale file of M too (the debugger's behaviour).
  DOCTEST_CHECK(names_in(dbg) == std::set<std::string>{"M.fresh_inputs_args_0.safetensors", "M.stale_inputs_args_0.safetensors",
                                                      "M_debug_tree_SUMMARY.json", "Other_debug_tree_SUMMARY.json", "link",
                                                      "user-dir", "user.txt"});
  DOCTEST_CHECK(slurp(dbg / "M_debug_tree_SUMMARY.json") == "new");
  DOCTEST_CHECK(slurp(dbg / "user.txt") == "the user's");
  DOCTEST_CHECK(slurp(dbg / "user-dir" / "inner.txt") == "inside");
  DOCTEST_CHECK(slurp(dbg / "Other_debug_tree_SUMMARY.json") == "other model");
  DOCTEST_CHECK(fs::is_symlink(dbg / "link"));
  DOCTEST_CHECK(fs::read_symlink(dbg / "link") == "user.txt");
  struct stat user_after {}, dir_after {};
  DOCTEST_REQUIRE(::stat((dbg / "user.txt").c_str(), &user_after) == 0);
  DOCTEST_CHECK(user_after.st_ino == user_before.st_ino);  // the same file (a link), not a copy
  DOCTEST_REQUIRE(::stat(dbg.c_str(), &dir_after) == 0);
  DOCTEST_CHECK((dir_after.st_mode & 07777) == 0750);  // the replaced directory's permissions
  // The replaced tree holds what the new one replaced, and goes when dropped.
  DOCTEST_REQUIRE(replaced.has_value());
  DOCTEST_CHECK(replaced->path().parent_path() == fs::absolute(root.path()));
  DOCTEST_CHECK(names_in(replaced->path()) == std::set<std::string>{"M_debug_tree_SUMMARY.json"});
  DOCTEST_CHECK(slurp(replaced->path() / "M_debug_tree_SUMMARY.json") == "old");
  replaced.reset();
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});

  // A predicate that refuses M's files: its stale and replaced files go, nothing else does.
  {
    StagedDirectory staged(dbg);
    put(staged.path() / "M_debug_tree_SUMMARY.json", "newer");
    const auto not_m = [](std::string_view name) { return !name.starts_with("M.") && !name.starts_with("M_"); };
    replaced = tracetorch::detail::publish(std::move(staged), not_m);
  }
  DOCTEST_CHECK(names_in(dbg) == std::set<std::string>{"M_debug_tree_SUMMARY.json", "Other_debug_tree_SUMMARY.json", "link",
                                                      "user-dir", "user.txt"});
  DOCTEST_CHECK(names_in(replaced->path()) == std::set<std::string>{"M.fresh_inputs_args_0.safetensors",
                                                                   "M.stale_inputs_args_0.safetensors", "M_debug_tree_SUMMARY.json"});
  replaced.reset();
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("the replaced tree can be kept (spares) and staged again - while kept, other publishes leave it alone") {
  Scratch root;
  const auto dbg = root / "dbg";
  add_user_entries(dbg);
  publish_generation(dbg, "part", 1);
  auto spares = [&] {
    StagedDirectory staged(dbg);
    write_generation(staged.path(), "part", 2);
    return tracetorch::detail::publish(std::move(staged));
  }();
  DOCTEST_REQUIRE(spares.has_value());
  DOCTEST_CHECK(generation_of(spares->path(), "part") == 1);  // the replaced files only
  DOCTEST_CHECK(names_in(spares->path()).size() == static_cast<std::size_t>(kParts));
  publish_generation(dbg, "other", 1);  // another publish: the kept tree is locked, not abandoned
  DOCTEST_CHECK(generation_of(spares->path(), "part") == 1);
  // Written over in place and published: the tree it replaces becomes the next spares.
  write_generation(spares->path(), "part", 3);
  auto next = tracetorch::detail::publish(std::move(*spares));
  DOCTEST_CHECK(generation_of(dbg, "part") == 3);
  DOCTEST_CHECK(generation_of(dbg, "other") == 1);
  DOCTEST_CHECK(slurp(dbg / "user-dir" / "inner.txt") == "inside");
  DOCTEST_REQUIRE(next.has_value());
  DOCTEST_CHECK(generation_of(next->path(), "part") == 2);
  next.reset();
  spares.reset();
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

}  // DOCTEST_TEST_SUITE

}  // namespace
}  // namespace tracetorch_publish_test
