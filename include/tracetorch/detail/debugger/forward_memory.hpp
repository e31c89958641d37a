#pragma once
/// \file
/// Memory for what a traced forward keeps until the root call returns: the call tree, its JSON
/// values and the bookkeeping of files and repeated tensors, taken outside malloc's heap.
//
// Why: the model's activations come and go in malloc's heap between module calls. Thousands of
// small allocations that live until the forward returns, carved out of the holes freed
// activations leave, kept glibc from reusing those holes whole: the heap of a traced forward grew
// to several times an untraced one's, was trimmed afterwards, and every next forward, traced or
// not, faulted the pages in again. With the trace's memory apart, the heap behaves as in an
// untraced forward (docs/performance.md, run 11).

#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define TRACETORCH_DETAIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRACETORCH_DETAIL_ASAN 1
#endif
#endif
#ifdef TRACETORCH_DETAIL_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include <boost/json/memory_resource.hpp>
#include <boost/json/storage_ptr.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory_resource>
#include <mutex>
#include <new>
#include <vector>

namespace tracetorch::detail {

/// Under AddressSanitizer, arena memory not handed out (or taken back by a rewind) is poisoned, so
/// that a use of trace memory after its forward ended is reported as one.
#ifdef TRACETORCH_DETAIL_ASAN
inline void arena_poison(const void* data, std::size_t size) noexcept { __asan_poison_memory_region(data, size); }
inline void arena_unpoison(const void* data, std::size_t size) noexcept { __asan_unpoison_memory_region(data, size); }
#else
inline void arena_poison(const void*, std::size_t) noexcept {}
inline void arena_unpoison(const void*, std::size_t) noexcept {}
#endif

/// Mapped memory, in blocks shared by the process's forward arenas, so that a forward in a new
/// debugger scope finds pages the last one used (a page touched for the first time costs a
/// fault). Keeps at most kKeptBytes of idle blocks; the rest are unmapped.
class ArenaBlocks {
 public:
  struct Block {
    std::byte* data = nullptr;
    std::size_t size = 0;
  };
  static constexpr std::size_t kBlockSize = std::size_t{1} << 20;
  static constexpr std::size_t kKeptBytes = std::size_t{64} << 20;

  /// Never destroyed: an arena may give its blocks back during static destruction.
  static ArenaBlocks& instance() {
    static ArenaBlocks* blocks = new ArenaBlocks;
    return *blocks;
  }

  /// A block of at least `size` bytes; std::bad_alloc where none can be mapped.
  Block take(std::size_t size) {
    {
      std::lock_guard lock(mutex_);
      // The most recently given back first: its memory is the likeliest still in the CPU caches.
      for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
        if (it->size < size) continue;
        const Block block = *it;
        idle_.erase(std::next(it).base());
        idle_bytes_ -= block.size;
        return block;
      }
    }
    const std::size_t rounded = (std::max(size, kBlockSize) + kBlockSize - 1) / kBlockSize * kBlockSize;
    void* data = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) throw std::bad_alloc();
    arena_poison(data, rounded);
    return {static_cast<std::byte*>(data), rounded};
  }

  void give_back(Block block) noexcept {
    {
      std::lock_guard lock(mutex_);
      if (idle_bytes_ + block.size <= kKeptBytes) {
        try {
          idle_.push_back(block);
          idle_bytes_ += block.size;
          return;
        } catch (const std::bad_alloc&) {
        }
      }
    }
    arena_unpoison(block.data, block.size);
    ::munmap(block.data, block.size);
  }

 private:
  ArenaBlocks() = default;
  std::mutex mutex_;
  std::vector<Block> idle_;
  std::size_t idle_bytes_ = 0;
};

/// A std::pmr resource as a Boost.JSON one. Its deallocation is a no-op, so that Boost.JSON
/// skips the destructors of the values it holds (is_deallocate_trivial, below).
class ForwardArenaJson final : public boost::json::memory_resource {
 public:
  explicit ForwardArenaJson(std::pmr::memory_resource& arena) : arena_(arena) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override { return arena_.allocate(bytes, alignment); }
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const boost::json::memory_resource& other) const noexcept override { return this == &other; }

  std::pmr::memory_resource& arena_;
};

}  // namespace tracetorch::detail

template <>
struct boost::json::is_deallocate_trivial<tracetorch::detail::ForwardArenaJson> : std::true_type {};

namespace tracetorch::detail {

/// A bump allocator over ArenaBlocks for one debugger session: what it hands out is freed all
/// at once by rewind(), at the end of each forward; its blocks stay with it for the next one.
/// Not thread-safe: a session's forward runs on one thread.
class ForwardArena final : public std::pmr::memory_resource {
 public:
  ForwardArena() { blocks_.reserve(64); }
  ForwardArena(const ForwardArena&) = delete;
  ForwardArena& operator=(const ForwardArena&) = delete;
  ~ForwardArena() override {
    for (const auto& block : blocks_) {
      arena_poison(block.data, block.size);
      ArenaBlocks::instance().give_back(block);
    }
  }

  /// Everything handed out becomes free; call it once nothing allocated here is alive.
  void rewind() noexcept {
    for (const auto& block : blocks_) arena_poison(block.data, block.size);
    current_ = 0;
    used_ = 0;
  }

  /// For Boost.JSON values.
  boost::json::storage_ptr json_storage() noexcept { return boost::json::storage_ptr(&json_); }

  /// Bytes held in blocks.
  std::size_t capacity() const noexcept {
    std::size_t total = 0;
    for (const auto& block : blocks_) total += block.size;
    return total;
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    for (;;) {
      if (current_ < blocks_.size()) {
        const auto& block = blocks_[current_];
        const std::size_t offset = (used_ + alignment - 1) & ~(alignment - 1);
        if (offset <= block.size && bytes <= block.size - offset) {
          used_ = offset + bytes;
          arena_unpoison(block.data + offset, bytes);
          return block.data + offset;
        }
        if (current_ + 1 < blocks_.size()) {  // the rest of this block stays unused
          ++current_;
          used_ = 0;
          continue;
        }
      }
      const auto block = ArenaBlocks::instance().take(bytes + alignment);
      try {
        blocks_.push_back(block);
      } catch (...) {
        ArenaBlocks::instance().give_back(block);
        throw;
      }
      current_ = blocks_.size() - 1;
      used_ = 0;
    }
  }
  void do_deallocate(void*, std::size_t, std::size_t) override {}  // freed by rewind()
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::vector<ArenaBlocks::Block> blocks_;
  std::size_t current_ = 0;  // the block being filled
  std::size_t used_ = 0;     // bytes taken from it
  ForwardArenaJson json_{*this};
};

}  // namespace tracetorch::detail
