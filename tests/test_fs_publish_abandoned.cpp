// detail/fs/publish.hpp, remove_abandoned_staging and remove_abandoned_inside: the cleanup of a
// killed run's staging directories removes only what those directories hold. A directory of the
// user's that a killed publish was carrying is never removed, even where both putting it back and
// renaming its tree to a kept name fail (fault injected); nothing is followed out through a link.
// A staging directory that now has its target's own name is never removed.

#include <doctest/doctest.h>
#include <tracetorch/detail/fs/fault_injection.hpp>
#include <tracetorch/detail/fs/publish.hpp>
#include <tracetorch/detail/fs/staged_directory.hpp>

#include "test_helpers.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace {

namespace fs = std::filesystem;
using tracetorch::detail::StagedDirectory;
using tracetorch_test::TempDir;

using tracetorch_test::write_text;

using tracetorch_test::read_file;

using tracetorch_test::file_names;

/// Publishes a tree holding `file` (its content: `text`) into `target`.
void publish_file(const fs::path& target, const std::string& file, const std::string& text,
                  const tracetorch::detail::CarryOver& carry_over = tracetorch::detail::keep_every_entry) {
  StagedDirectory staged(target);
  write_text(staged.path() / file, text);
  tracetorch::detail::publish(std::move(staged), carry_over);
}

/// Fails every "keep" step (the rename of an abandoned tree to a kept name) while it lives.
struct FailKeep {
  static int fail(std::string_view step) { return step == "keep" ? EACCES : 0; }
  FailKeep() { tracetorch::detail::io_fault_injector = &fail; }
  ~FailKeep() { tracetorch::detail::io_fault_injector = nullptr; }
};

/// The leftover of a killed publish between its exchange and its moves (made by hand: nobody
/// holds its flock): the replaced tree, holding the only copy of a directory of the user's.
fs::path abandoned_tree(const fs::path& root) {
  const auto tree = root / ".dbg.tracetorch-staging-1-0123456789abcdef";
  fs::create_directories(tree / "user-dir");
  write_text(tree / "user-dir" / "only-copy.txt", "precious");
  write_text(tree / "part", "old generation");
  return tree;
}

}  // namespace

DOCTEST_TEST_SUITE("publish: abandoned staging directories") {

DOCTEST_TEST_CASE("a user's directory in an abandoned tree is never removed: put back, else kept, else left where it is") {
  TempDir root;
  const auto dbg = root / "dbg";
  publish_file(dbg, "part", "1");
  // The target has a "user-dir" of its own now, so the abandoned one cannot be put back.
  fs::create_directories(dbg / "user-dir");
  const auto tree = abandoned_tree(root.path());
  {
    const FailKeep fail_keep;  // and renaming the tree to a kept name fails too
    publish_file(dbg, "part", "2");
  }
  DOCTEST_CHECK(read_file(dbg / "part") == "2");
  DOCTEST_REQUIRE(fs::is_directory(tree));  // left at its name: before this fix, removed with the user's file
  DOCTEST_CHECK(read_file(tree / "user-dir" / "only-copy.txt") == "precious");

  // The next publish, where the rename works, keeps it under a kept name, whole.
  publish_file(dbg, "part", "3");
  DOCTEST_CHECK_FALSE(fs::exists(tree));
  std::set<std::string> kept;
  for (const auto& name : file_names(root.path())) {
    if (name.starts_with(".dbg.tracetorch-kept-")) kept.insert(name);
  }
  DOCTEST_REQUIRE(kept.size() == 1);
  DOCTEST_CHECK(read_file(root / *kept.begin() / "user-dir" / "only-copy.txt") == "precious");
  DOCTEST_CHECK(read_file(dbg / "part") == "3");

  // Where the target has no such directory, it is put back into the new tree and the rest goes.
  fs::remove_all(dbg / "user-dir");
  const auto again = abandoned_tree(root.path());
  publish_file(dbg, "part", "4");
  DOCTEST_CHECK_FALSE(fs::exists(again));
  DOCTEST_CHECK(read_file(dbg / "user-dir" / "only-copy.txt") == "precious");
  DOCTEST_CHECK(read_file(dbg / "part") == "4");
}

DOCTEST_TEST_CASE("removing an abandoned staging directory follows no link out of it and empties what it holds") {
  TempDir root;
  const auto dbg = root / "dbg";
  publish_file(dbg, "part", "1");
  fs::create_directories(root / "outside");
  write_text(root / "outside" / "kept.txt", "outside");
  const auto tree = root / ".dbg.tracetorch-staging-7-fedcba9876543210";
  fs::create_directories(tree / "scratch" / "deeper");
  write_text(tree / "scratch" / "deeper" / "a.txt", "a");
  fs::create_directory_symlink(root / "outside", tree / "link-to-outside");
  fs::create_symlink(root / "outside" / "kept.txt", tree / "link-to-file");
  // A carry-over that drops "scratch": the abandoned tree's copy is the publisher's to remove.
  publish_file(dbg, "part", "2", [](std::string_view name) { return name != "scratch"; });
  DOCTEST_CHECK_FALSE(fs::exists(fs::symlink_status(tree)));
  DOCTEST_CHECK(read_file(root / "outside" / "kept.txt") == "outside");
  DOCTEST_CHECK(file_names(root / "outside") == std::set<std::string>{"kept.txt"});
  DOCTEST_CHECK(file_names(dbg) == std::set<std::string>{"part"});

  // A leftover spares directory inside the target (remove_abandoned_inside) likewise.
  const auto inside = dbg / ".tracetorch-spares-9-0123456789abcdef";
  fs::create_directories(inside / "sub");
  write_text(inside / "sub" / "f", "x");
  fs::create_directory_symlink(root / "outside", inside / "link");
  tracetorch::detail::remove_abandoned_inside(dbg, ".tracetorch-spares-");
  DOCTEST_CHECK_FALSE(fs::exists(fs::symlink_status(inside)));
  DOCTEST_CHECK(read_file(root / "outside" / "kept.txt") == "outside");
}

DOCTEST_TEST_CASE("a discarded staging directory is removed through its descriptor - never what now has its name") {
  TempDir tmp;
  const auto root = tmp.path();
  fs::create_directory(root / "outside");
  write_text(root / "outside" / "kept.txt", "outside");

  // Another writer's publish moved the staging directory away and a directory of the user's took
  // its name: discarding removes the moved directory (found through /proc) and leaves the user's.
  std::optional<StagedDirectory> staged(std::in_place, root / "dbg");
  const fs::path old_name = staged->path();
  fs::create_directory(staged->path() / "sub");
  write_text(staged->path() / "sub" / "part", "staged");
  fs::create_directory_symlink(root / "outside", staged->path() / "link");
  fs::rename(old_name, root / "moved");
  fs::create_directory(old_name);
  write_text(old_name / "users.txt", "user");
  staged.reset();
  DOCTEST_CHECK_FALSE(fs::exists(fs::symlink_status(root / "moved")));
  DOCTEST_CHECK(read_file(old_name / "users.txt") == "user");
  DOCTEST_CHECK(read_file(root / "outside" / "kept.txt") == "outside");

  // Not moved: the staging directory and what it holds go, a link in it is not followed.
  {
    StagedDirectory plain(root / "dbg");
    write_text(plain.path() / "part", "x");
    fs::create_directory_symlink(root / "outside", plain.path() / "link");
    const fs::path name = plain.path();
    plain.discard();
    DOCTEST_CHECK_FALSE(fs::exists(fs::symlink_status(name)));
  }
  DOCTEST_CHECK(file_names(root / "outside") == std::set<std::string>{"kept.txt"});
}

DOCTEST_TEST_CASE("a staging directory found at its target's own name is never discarded") {
  // A process that shared the descriptor (a forked child) published it as the target: it is a
  // trace now, with the user's files beside it. Before the guard, discarding it followed it there
  // and removed the target with everything in it.
  TempDir tmp;
  const auto target = tmp.path() / "dbg";
  std::optional<StagedDirectory> staged(std::in_place, target);
  write_text(staged->path() / "trace.json", "{}");
  fs::rename(staged->path(), target);
  write_text(target / "users.txt", "user");
  staged.reset();
  DOCTEST_CHECK(read_file(target / "trace.json") == "{}");
  DOCTEST_CHECK(read_file(target / "users.txt") == "user");
}

}  // DOCTEST_TEST_SUITE
