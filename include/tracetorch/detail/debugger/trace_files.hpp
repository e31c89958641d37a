#pragma once
/// \file
/// The files of a trace in debug_path: written into a staging directory as the forward runs
/// (hard links for repeated tensors), the two JSON files when the root returns, then published
/// (trace_publish.hpp), so that a forward that fails or is killed leaves the previous trace whole.

#include <torch/torch.h>

#include <fcntl.h>   // AT_FDCWD, AT_EACCESS
#include <unistd.h>  // faccessat, linkat, renameat, unlinkat

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <filesystem>
#include <memory>
#include <memory_resource>
#include <unordered_set>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tracetorch/detail/debugger/forward_memory.hpp"
#include "tracetorch/detail/debugger/spare_files.hpp"
#include "tracetorch/detail/debugger/trace_publish.hpp"
#include "tracetorch/detail/debugger/trace_tree.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/detail/safetensors/torch.hpp"  // write_safetensors
#include "tracetorch/detail/fs/staged_file_writer.hpp"
#include "tracetorch/detail/trace_format/format.hpp"

namespace tracetorch::detail {

/// The file name (without ".safetensors") for a tensor whose transformers file stem is `stem`.
/// Stems hold module paths and dict keys, and LibTorch allows any submodule name but an empty one
/// or one with a '.': a '/' would reach into other directories, or out of debug_path with a key
/// such as "../x". So '/', '%' (the escape
/// character, so that different stems never share a name) and control characters (0x00-0x1F,
/// 0x7F) become %XX (uppercase hex); every other byte, and so every stem Python's debugger can
/// write, is kept as it is.
inline std::string file_name_for(std::string_view stem) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(stem.size());
  for (const char c : stem) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '/' || c == '%' || byte < 0x20 || byte == 0x7F) {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

/// Makes `debug_path` where it is missing; throws tracetorch::Error where it cannot be made or
/// written, so that a trace fails now and not after a long forward.
inline void prepare_debug_path(const std::filesystem::path& debug_path) {
  std::error_code ec;
  std::filesystem::create_directories(debug_path, ec);
  if (ec || !std::filesystem::is_directory(debug_path)) {
    throw Error("tracetorch: cannot create debug_path " + debug_path.string() + ": " +
                (ec ? ec.message() : std::string("not a directory")));
  }
  // Asked of the kernel (permissions, a read-only filesystem): creating and removing a probe
  // file cost more than the rest of a small model's trace setup.
  if (::faccessat(AT_FDCWD, debug_path.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    throw Error("tracetorch: cannot write in debug_path " + debug_path.string() + ": " + std::strerror(errno));
  }
}

/// Writes the JSON text of the tree under `root` in pieces of about 64 KiB: built whole, the
/// text of a large trace was a fresh multi-megabyte string each forward, and faulting in its
/// pages cost more than writing it.
inline void write_json_text(StagedFileWriter& file, const CallNode& root, bool strip_values) {
  constexpr std::size_t kPiece = 64 * 1024;
  std::string text;
  text.reserve(2 * kPiece);
  const auto drain = [&](std::string& out) {
    if (out.size() < kPiece) return;
    file.write(out);
    out.clear();
  };
  append_call_node(text, root, 0, strip_values, drain);
  file.write(text);
  file.finish();
}

/// The files of one session's traces: `<root name>_debug_tree_{FULL_TENSORS,SUMMARY}.json` and,
/// with use_repr=false, one `<stem>.safetensors` per tensor. Between begin() and end() it holds
/// the staging directory of a forward and the files staged there, in the forward's arena.
class TraceFiles {
 public:
  /// `keep_spares`: the files a trace replaces are kept for the next one to write over
  /// (DebuggerOptions::reuse_previous_files): with `use_repr`, the JSON files; without it, the
  /// tensor files (the JSON files of such a trace are small next to them).
  TraceFiles(const std::string& root_name, std::filesystem::path debug_path, bool keep_spares, bool use_repr)
      : debug_path_(std::move(debug_path)),
        json_names_{root_name + std::string(trace_format::kFullTensorsSuffix), root_name + std::string(trace_format::kSummarySuffix)},
        full_tensors_path_(debug_path_ / json_names_[0]),
        summary_path_(debug_path_ / json_names_[1]) {
    publishing_.debug_path = debug_path_;
    publishing_.keep_spares = keep_spares;
    if (!use_repr) publishing_.not_spares = json_names_;
  }

  const std::filesystem::path& full_tensors_path() const noexcept { return full_tensors_path_; }
  const std::filesystem::path& summary_path() const noexcept { return summary_path_; }

  /// A forward begins: its staged files' bookkeeping goes to `memory`. The staging directory is
  /// made at the first file, so that a failure to make it fails the forward, not its start.
  void begin(ForwardArena& memory) {
    staged_.emplace(&memory);
    written_.emplace(&memory);
    reused_ = false;
    set_aside_ = 0;
    try {
      publishing_.target = SpareFilesRegistry::key_of(debug_path_);
      if (publishing_.keep_spares) borrow_spares();
    } catch (const std::exception&) {
      publishing_.target.clear();  // out of memory: found again at the first file
    }
  }

  /// The tensor files this forward has written so far.
  std::size_t count() const noexcept { return staged_ ? staged_->size() : 0; }

  /// Writes `tensor` to the file transformers names after `stem`; returns the JSON value.
  std::string write(const torch::Tensor& tensor, const std::string& stem) {
    const std::string file_name = tensor_file_name(stem);
    const auto shown_as = debug_path_ / file_name;
    const int directory = staging().fd();
    set_aside_earlier(file_name);
    try {
      StagedFileWriter writer(directory, file_name, shown_as);
      write_safetensors(writer, shown_as, {{std::string(trace_format::kTensorKey), tensor}}, {});
      writer.finish();
    } catch (...) {
      put_back_earlier(file_name);
      throw;
    }
    add_staged(file_name);
    return json_value_of(file_name);
  }

  /// The file for `tensor` under `stem`, which holds what the `index`th file of this forward
  /// holds: a hard link to that file, or a copy where the filesystem has no hard links.
  std::string link(const torch::Tensor& tensor, const std::string& stem, std::size_t index) {
    if (hard_links_work_) {
      const std::string file_name = tensor_file_name(stem);
      const int directory = staging().fd();
      set_aside_earlier(file_name);  // first: the file linked from may be the one of that name
      char source[kAsideNameSize];
      const char* from = staged_name((*staged_)[index], source);
      int linked = ::linkat(directory, from, directory, file_name.c_str(), 0);
      if (linked != 0 && errno == EEXIST && reused_) {  // a spare of a name that was no link last time
        ::unlinkat(directory, file_name.c_str(), 0);
        linked = ::linkat(directory, from, directory, file_name.c_str(), 0);
      }
      if (linked == 0) {
        add_staged(file_name, true);
        return json_value_of(file_name);
      }
      put_back_earlier(file_name);
      hard_links_work_ = false;  // EPERM (no hard links on this filesystem), EMLINK, ...
    }
    return write(tensor, stem);
  }

  /// Removes the staged files written since the forward had written `count`.
  void discard_from(std::size_t count) noexcept {
    if (!staged_ || !staging_) return;
    auto& files = *staged_;
    while (files.size() > count) {
      char aside[kAsideNameSize];
      ::unlinkat(staging_->fd(), staged_name(files.back(), aside), 0);
      const bool had_the_name = files.back().aside == 0;
      const std::pmr::string name = std::move(files.back().name);
      files.pop_back();
      if (had_the_name) put_back_earlier(name);
    }
  }

  /// The forward returned with the tree under `root`: writes both JSON files, then publishes
  /// the trace.
  void commit(const CallNode& root) {
    // Both JSON files are complete on disk before any file of this trace takes its final name,
    // so a full disk leaves the previous trace whole instead of half replaced.
    write_json(json_names_[0], root, false);
    write_json(json_names_[1], root, true);
    std::vector<std::string> names;
    names.reserve(staged_->size() + 2);
    for (const auto& file : *staged_) {
      if (file.aside == 0) names.emplace_back(file.name);
    }
    names.insert(names.end(), json_names_.begin(), json_names_.end());
    if (reused_ || set_aside_ > 0) keep_only(names);
    publishing_.linked.clear();
    for (const auto& file : *staged_) {
      if (file.aside == 0 && file.linked) publishing_.linked.push_back(file.name.c_str());
    }
    publish_trace(staging_, publishing_, names);
    publishing_.linked.clear();  // views of this forward's names
  }

  /// The forward is over; `keep_files`: it was published. The spares go back to the registry.
  void end(bool keep_files) noexcept {
    if (staging_ && !keep_files) {
      for (const auto& name : json_names_) ::unlinkat(staging_->fd(), name.c_str(), 0);
      // A failed forward keeps the spares it did not write over (where they still are), and
      // takes a directory it made with it: debug_path is left as it was.
      if (!reused_ || !staging_->inside(publishing_.target)) staging_.reset();
    }
    if (staging_) {
      try {
        SpareFilesRegistry::instance().give_back(std::move(staging_));
      } catch (const std::exception&) {
      }
      staging_.reset();  // not given back: removed
    }
    written_.reset();
    staged_.reset();
  }

 private:
  /// A staged file: `name` in the staging directory, or, where a later file of this forward took
  /// that name (two stems that name one file: the later wins, as in Python), `.tracetorch-aside-<aside>`.
  struct StagedFile {
    std::pmr::string name;
    unsigned aside;
    bool linked;  // a hard link to an earlier file of this forward (a repeated tensor)
  };
  static constexpr std::size_t kAsideNameSize = publish_detail::kAsideNameSize;
  /// Looks names up by string_view (no copy).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
  };

  /// Where `file` is in the staging directory; `buffer` holds the name of a file set aside.
  static const char* staged_name(const StagedFile& file, char (&buffer)[kAsideNameSize]) noexcept {
    if (file.aside == 0) return file.name.c_str();
    return publish_detail::aside_name(file.aside, buffer);
  }

  static std::string tensor_file_name(const std::string& stem) {
    return file_name_for(stem) + std::string(trace_format::kTensorFileExtension);
  }
  /// The JSON `value` of a tensor in the file `file_name`.
  static std::string json_value_of(const std::string& file_name) {
    return std::string(trace_format::kTensorFilePrefix) + file_name;
  }

  /// The forward's staging directory, made at the first need.
  TraceStaging& staging() {
    if (!staging_) {
      if (publishing_.target.empty()) publishing_.target = SpareFilesRegistry::key_of(debug_path_);
      staging_ = std::make_unique<TraceStaging>(publishing_.target.string(), publishing_.target);
    }
    return *staging_;
  }

  void borrow_spares() {
    auto spares = SpareFilesRegistry::instance().borrow(publishing_.target.string());
    // Spares whose debug_path was removed or moved since are dropped (removed where they are).
    if (!spares || !spares->inside(publishing_.target)) return;
    staging_ = std::move(spares);
    reused_ = true;
  }

  void write_json(const std::string& name, const CallNode& root, bool strip_values) {
    StagedFileWriter file(staging().fd(), name, debug_path_ / name);
    write_json_text(file, root, strip_values);
  }

  void add_staged(const std::string& file_name, bool linked = false) {
    const auto memory = staged_->get_allocator().resource();
    staged_->push_back({std::pmr::string(file_name, memory), 0, linked});
    written_->emplace(file_name);
  }

  /// Where `name` was written before in this forward, that file is renamed aside: its content
  /// stays for the links made from it, and the name is free for the later file.
  void set_aside_earlier(const std::string& name) {
    if (!written_->contains(std::string_view(name))) return;
    for (auto it = staged_->rbegin(); it != staged_->rend(); ++it) {
      if (it->aside != 0 || std::string_view(it->name) != name) continue;
      char aside[kAsideNameSize];
      const unsigned number = ++set_aside_;
      if (::renameat(staging_->fd(), name.c_str(), staging_->fd(), publish_detail::aside_name(number, aside)) != 0) {
        throw Error("tracetorch: cannot write " + (debug_path_ / name).string() + ": " + std::strerror(errno));
      }
      it->aside = number;
      return;
    }
  }

  /// Undoes set_aside_earlier where the later file of `name` is gone.
  void put_back_earlier(std::string_view name) noexcept {
    if (set_aside_ == 0 || !staged_) return;
    for (auto it = staged_->rbegin(); it != staged_->rend(); ++it) {
      if (std::string_view(it->name) != name) continue;
      if (it->aside == 0) return;  // the name is held
      char aside[kAsideNameSize];
      if (::renameat(staging_->fd(), staged_name(*it, aside), staging_->fd(), it->name.c_str()) == 0) it->aside = 0;
      return;
    }
  }

  /// Removes from the staging directory whatever is not one of `names`: spares this forward did
  /// not write over, files set aside. It then holds exactly the new trace.
  void keep_only(const std::vector<std::string>& names) {
    publish_detail::remove_entries_except(staging_->fd(), names);
  }

  std::filesystem::path debug_path_;
  std::vector<std::string> json_names_;  // FULL_TENSORS, SUMMARY
  std::filesystem::path full_tensors_path_;
  std::filesystem::path summary_path_;
  PublishState publishing_;
  bool hard_links_work_ = true;
  bool reused_ = false;      // staging_ holds the spares of an earlier trace
  unsigned set_aside_ = 0;   // files set aside in this forward
  std::unique_ptr<TraceStaging> staging_;  // between begin() and end(), once made or borrowed
  std::optional<std::pmr::vector<StagedFile>> staged_;  // between begin() and end()
  std::optional<std::pmr::unordered_set<std::pmr::string, NameHash, std::equal_to<>>> written_;  // the names staged_ ever held
};

}  // namespace tracetorch::detail
