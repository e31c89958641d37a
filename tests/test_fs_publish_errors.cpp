// Whole-tree replacement of a trace directory (issue 26, item 1): what detail/fs/publish.hpp
// refuses, with the path named: a symbolic link, a regular file, an unwritable or missing parent,
// the process's working directory, and a lock held longer than its timeout. docs/reliability.md
// ("A trace is replaced whole") lists each promise and the test that proves it.

#include <doctest/doctest.h>
#include <tracetorch/detail/fs/directory_lock.hpp>
#include <tracetorch/detail/fs/publish.hpp>
#include <tracetorch/detail/fs/staged_directory.hpp>

#include "publish_helpers.hpp"

#include <sys/stat.h>  // mkfifo
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tracetorch_publish_test {
namespace {

DOCTEST_TEST_SUITE("publish") {

DOCTEST_TEST_CASE("publish errors name the path: a symbolic link, a regular file, an unwritable or missing parent") {
  Scratch root;
  fs::create_directories(root / "real");
  put(root / "real" / "kept", "kept");
  fs::create_symlink("real", root / "dbg-link");
  const auto link = fs::absolute(root / "dbg-link").string();
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::publish(StagedDirectory(root / "dbg-link")),
                               doctest::Contains((link + ": it is a symbolic link").c_str()), tracetorch::Error);
  DOCTEST_CHECK(names_in(root / "real") == std::set<std::string>{"kept"});

  put(root / "file", "a file");
  const auto file = fs::absolute(root / "file").string();
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::publish(StagedDirectory(root / "file")),
                               doctest::Contains((file + ": not a directory").c_str()), tracetorch::Error);
  DOCTEST_CHECK(slurp(root / "file") == "a file");

  const auto missing = fs::absolute(root / "no" / "dbg").string();
  DOCTEST_CHECK_THROWS_WITH_AS(StagedDirectory(root / "no" / "dbg"), doctest::Contains(missing.c_str()), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(StagedDirectory(root / "no" / "dbg"), doctest::Contains("No such file or directory"),
                               tracetorch::Error);
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg-link", "file", "real"});

  // Unwritable parent: in a child that, as root, becomes nobody so that permissions bind.
  fs::create_directories(root / "ro" / "dbg");
  fs::permissions(root / "ro", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                   fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const auto ro_target = fs::absolute(root / "ro" / "dbg").string();
  const Child child = start_child([&](int out) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      write_text(out, "skipped: cannot become nobody");
      return;
    }
    try {
      StagedDirectory staged(ro_target);
      write_text(out, "no error");
    } catch (const tracetorch::Error& error) {
      write_text(out, error.what());
    }
  });
  const std::string message = read_all(child.out);
  ::close(child.out);
  DOCTEST_CHECK(wait_for(child) == 0);
  if (message.starts_with("skipped")) {
    DOCTEST_MESSAGE(message);
  } else {
    DOCTEST_CHECK(message.find(ro_target) != std::string::npos);
    DOCTEST_CHECK(message.find("Permission denied") != std::string::npos);
  }
  DOCTEST_CHECK(names_in(root / "ro") == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("publish refuses the process's working directory and waits for a lock at most its timeout") {
  Scratch root;
  const auto dbg = root / "dbg";
  publish_generation(dbg, "part", 1);
  const Child child = start_child([&](int out) {
    if (::chdir(dbg.c_str()) != 0) throw std::runtime_error("chdir failed");
    StagedDirectory staged(".");
    write_generation(staged.path(), "part", 2);
    try {
      tracetorch::detail::publish(std::move(staged));
      write_text(out, "published");
    } catch (const tracetorch::detail::CannotExchange& error) {
      write_text(out, error.what());
    }
  });
  const std::string message = read_all(child.out);
  ::close(child.out);
  DOCTEST_CHECK(wait_for(child) == 0);
  DOCTEST_CHECK(message.find(fs::absolute(dbg).string() + ": it is this process's working directory") != std::string::npos);
  DOCTEST_CHECK(generation_of(dbg, "part") == 1);
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});

  // Another holder (another open: a thread of this process counts as another holder too).
  DirectoryLock held(dbg, LockMode::exclusive);
  const auto started = std::chrono::steady_clock::now();
  DOCTEST_CHECK_THROWS_WITH_AS(DirectoryLock(dbg, LockMode::shared, std::chrono::milliseconds(50)),
                               doctest::Contains((fs::absolute(dbg).string() + ": another process or thread held it for 50 ms").c_str()),
                               tracetorch::Error);
  DOCTEST_CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

/// For the injector, which takes no captures: the user's file to turn into a FIFO at the first link.
fs::path g_becomes_fifo;

int fifo_at_first_link(std::string_view step) {
  if (step != "link" || g_becomes_fifo.empty()) return 0;
  fs::remove(g_becomes_fifo);
  if (::mkfifo(g_becomes_fifo.c_str(), 0644) != 0) return EIO;
  g_becomes_fifo.clear();
  return EPERM;  // no hard links here: the entry is copied, and is a FIFO by then
}

DOCTEST_TEST_CASE("a user's file replaced by a FIFO while it is copied into the new tree: refused at once, target unchanged") {
  // Without a non-blocking open, copying the FIFO waits for a writer forever: in a child, ended
  // after a bounded wait.
  Scratch root;
  const auto dbg = root / "dbg";
  publish_generation(dbg, "part", 1);
  put(dbg / "user.txt", "the user's");
  const Child child = start_child([&](int out) {
    g_becomes_fifo = fs::absolute(dbg / "user.txt");
    tracetorch::detail::io_fault_injector = &fifo_at_first_link;
    try {
      publish_generation(dbg, "part", 2);
      write_text(out, "published");
    } catch (const tracetorch::Error& error) {
      write_text(out, error.what());
    }
  });
  const int code = wait_for(child, std::chrono::seconds(30));  // before reading: a blocked child never closes its end
  const std::string message = read_all(child.out);
  ::close(child.out);
  DOCTEST_CHECK(code == 0);
  DOCTEST_INFO(message);
  DOCTEST_CHECK(message.find("cannot keep " + fs::absolute(dbg / "user.txt").string() +
                             " in the new tree (link: Operation not permitted, copy: it is no longer a regular file); " +
                             fs::absolute(dbg).string() + " is unchanged") != std::string::npos);
  DOCTEST_CHECK(generation_of(dbg, "part") == 1);
  DOCTEST_CHECK(fs::is_fifo(dbg / "user.txt"));
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

}  // DOCTEST_TEST_SUITE

}  // namespace
}  // namespace tracetorch_publish_test
