#pragma once
/// \file
/// The files of a trace in debug_path: tensor files staged under other names as the forward
/// runs (hard links for repeated tensors), then all of them given their names with the two JSON
/// files when the root returns, so that a forward that fails leaves the previous trace whole.

#include <torch/torch.h>

#include <fcntl.h>   // AT_FDCWD, AT_EACCESS
#include <unistd.h>  // faccessat, link, unlink

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tracetorch/detail/debugger/forward_memory.hpp"
#include "tracetorch/detail/debugger/spare_files.hpp"
#include "tracetorch/detail/trace/format.hpp"
#include "tracetorch/detail/debugger/trace_tree.hpp"
#include "tracetorch/detail/error.hpp"
#include "tracetorch/detail/io/atomic_file.hpp"
#include "tracetorch/detail/io/safetensors_torch.hpp"  // write_safetensors

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
inline void write_json_text(AtomicFileWriter& file, const CallNode& root, bool strip_values) {
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
/// the files a forward has staged, in the forward's arena.
class TraceFiles {
 public:
  /// `keep_spares`: the files a trace replaces are kept for the next one to write over
  /// (DebuggerOptions::reuse_previous_files, with use_repr=false).
  TraceFiles(const std::string& root_name, std::filesystem::path debug_path, bool keep_spares)
      : debug_path_(std::move(debug_path)),
        full_tensors_path_(debug_path_ / (root_name + std::string(trace_format::kFullTensorsSuffix))),
        summary_path_(debug_path_ / (root_name + std::string(trace_format::kSummarySuffix))),
        keep_spares_(keep_spares) {}

  const std::filesystem::path& full_tensors_path() const noexcept { return full_tensors_path_; }
  const std::filesystem::path& summary_path() const noexcept { return summary_path_; }

  /// A forward begins: its staged files' bookkeeping goes to `memory`.
  void begin(ForwardArena& memory) {
    if (keep_spares_) borrow_spares();
    staged_.emplace(&memory);
  }

  /// The tensor files this forward has written so far.
  std::size_t count() const noexcept { return staged_ ? staged_->size() : 0; }

  /// Writes `tensor` to the file transformers names after `stem`; returns the JSON value.
  std::string write(const torch::Tensor& tensor, const std::string& stem) {
    const std::string file_name = tensor_file_name(stem);
    const auto path = debug_path_ / file_name;
    // Written under a temporary name and renamed with the JSON files at the end of the
    // forward: a forward that fails leaves the files of the previous trace as they were.
    std::optional<AtomicFileWriter> writer;
    const auto staged = spares_ ? spares_->claim(file_name) : std::nullopt;
    if (staged) {
      writer.emplace(path, *staged, overwrite_existing);
    } else {
      writer.emplace(path);
    }
    write_safetensors(*writer, path, {{std::string(trace_format::kTensorKey), tensor}}, {});
    add_staged(writer->release(), path, staged.has_value());
    return json_value_of(file_name);
  }

  /// The file for `tensor` under `stem`, which holds what the `index`th file of this forward
  /// holds: a hard link to that file, or a copy where the filesystem has no hard links.
  std::string link(const torch::Tensor& tensor, const std::string& stem, std::size_t index) {
    if (hard_links_work_) {
      const std::string file_name = tensor_file_name(stem);
      auto path = debug_path_ / file_name;
      const auto in_spares = spares_ ? spares_->claim(file_name) : std::nullopt;
      auto staged = in_spares ? *in_spares : unique_temp_path(path);
      if (in_spares) ::unlink(staged.c_str());  // the spare of a name that is a link this time
      if (::link((*staged_)[index].staged.c_str(), staged.c_str()) == 0) {
        add_staged(staged, path, in_spares.has_value());
        return json_value_of(file_name);
      }
      hard_links_work_ = false;  // EPERM (no hard links on this filesystem), EMLINK, ...
    }
    return write(tensor, stem);
  }

  /// Removes the staged files written since the forward had written `count`.
  void discard_from(std::size_t count) noexcept {
    if (!staged_) return;
    auto& files = *staged_;
    std::error_code ignored;
    for (std::size_t i = count; i < files.size(); ++i) std::filesystem::remove(files[i].staged, ignored);
    if (count < files.size()) files.erase(files.begin() + static_cast<std::ptrdiff_t>(count), files.end());
  }

  /// The forward returned with the tree under `root`: writes both JSON files, then gives every
  /// file of the trace its name.
  void commit(const CallNode& root) {
    // Both JSON files are complete on disk before any file of this trace takes its final name,
    // so a full disk leaves the previous trace whole instead of half replaced.
    AtomicFileWriter full(full_tensors_path_);
    write_json_text(full, root, false);
    AtomicFileWriter summary(summary_path_);
    write_json_text(summary, root, true);
    if (spares_) spares_->drop_unclaimed();
    place_staged_files();
    full.commit();
    summary.commit();
  }

  /// The forward is over; `keep_files`: it was committed. Its spares go back to the registry.
  void end(bool keep_files) noexcept {
    if (spares_) {
      spares_->forget_claims();
      // A failed forward with no spares to keep (one that would have replaced a first trace)
      // takes its hidden directory with it: the directory is left as it was.
      try {
        if (keep_files || !spares_->empty()) SpareFilesRegistry::instance().give_back(std::move(spares_));
      } catch (const std::exception&) {
      }
      spares_.reset();  // not given back: removed with its directory
    }
    staged_.reset();
  }

 private:
  struct StagedFile {
    std::pmr::string staged;
    std::pmr::string target;
    bool in_spares;  // staged in spares_' directory
  };

  static std::string tensor_file_name(const std::string& stem) {
    return file_name_for(stem) + std::string(trace_format::kTensorFileExtension);
  }
  /// The JSON `value` of a tensor in the file `file_name`.
  static std::string json_value_of(const std::string& file_name) {
    return std::string(trace_format::kTensorFilePrefix) + file_name;
  }

  void borrow_spares() {
    // Spares only where this forward replaces a trace: a first trace into a directory makes
    // no hidden directory there.
    try {
      std::error_code ignored;
      spares_ = SpareFilesRegistry::instance().borrow(debug_path_, std::filesystem::exists(full_tensors_path_, ignored));
      if (spares_ && !spares_->prepare()) spares_.reset();
    } catch (const std::exception&) {
      spares_.reset();  // out of memory: this forward writes new files, as without spares
    }
  }

  void add_staged(const std::filesystem::path& staged, const std::filesystem::path& target, bool in_spares) {
    const auto memory = staged_->get_allocator().resource();
    staged_->push_back({std::pmr::string(staged.native(), memory), std::pmr::string(target.native(), memory), in_spares});
  }

  void place_staged_files() {
    for (const auto& file : *staged_) {
      std::error_code ec;
      const std::filesystem::path staged(file.staged), target(file.target);
      if (file.in_spares) {
        spares_->placed(staged.filename().string(), replace_file_keeping_old(staged, target, ec));
      } else {
        replace_file(staged, target, ec);
      }
      if (ec) throw Error("tracetorch: cannot write " + target.string() + ": " + ec.message());
    }
    staged_->clear();  // renamed: nothing left to remove
  }

  std::filesystem::path debug_path_;
  std::filesystem::path full_tensors_path_;
  std::filesystem::path summary_path_;
  bool keep_spares_;
  bool hard_links_work_ = true;
  std::unique_ptr<SpareFiles> spares_;  // lent for one forward, with keep_spares_
  std::optional<std::pmr::vector<StagedFile>> staged_;  // between begin() and end()
};

}  // namespace tracetorch::detail
