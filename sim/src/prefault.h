// Prefaulter: a thread that faults in the pages of the simulation's result
// tables ahead of their first use, on the core the simulation leaves idle.
//
// On the development machine a first touch of a page is dear: the VM gives
// free memory back to its host, so a fresh page costs a host fault, and
// zeroing fresh pages (`clear_page_erms`) was ~9% of the simulate phase of a
// million demands, almost all of it for the result (demands 40 MB, tasks
// 33 MB). Those tables are reserved up front and filled in order, so their
// addresses are known: madvise(MADV_POPULATE_WRITE) (Linux 5.14) faults their
// pages in without touching their contents, a little ahead of the part in
// use, so the memory taken is what the result needs anyway. Where the call is
// not supported, nothing happens: pages are faulted in on first use as before.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace dfl::sim {

class Prefaulter {
 public:
  // A table of `capacity` elements of `element_bytes` at `data`, filled from
  // its start: used(table, n) says that n elements are in use.
  struct Table {
    void* data = nullptr;
    std::size_t element_bytes = 0;
    std::size_t capacity = 0;
  };
  static constexpr std::size_t kTables = 3;
  // Kept faulted in beyond the part in use: a million-demand run fills
  // ~16 KB of its tables per millisecond, the thread looks every few.
  static constexpr std::size_t kAheadBytes = 16u << 20;

  explicit Prefaulter(const std::array<Table, kTables>& tables) : tables_(tables) {
    thread_ = std::thread([this] { run(); });
  }
  ~Prefaulter() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  void used(std::size_t table, std::size_t elements) {
    used_[table].store(elements, std::memory_order_relaxed);
  }

  // Bytes faulted in so far, for tests (after the thread has caught up).
  std::size_t populated_bytes(std::size_t table) const {
    return done_[table].load(std::memory_order_acquire);
  }
  // Whether the kernel refused (no MADV_POPULATE_WRITE): nothing was done.
  bool unsupported() const { return unsupported_.load(std::memory_order_acquire); }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      lock.unlock();
      bool more = false;
      for (std::size_t i = 0; i < kTables && !unsupported_; ++i)
        more |= step(i);
      lock.lock();
      if (unsupported_ || complete()) return;  // Nothing left to do.
      if (!more) wake_.wait_for(lock, std::chrono::milliseconds(2), [this] { return stop_; });
    }
  }

  std::size_t total_bytes(std::size_t i) const {
    return tables_[i].data == nullptr ? 0 : tables_[i].capacity * tables_[i].element_bytes;
  }

  bool complete() const {
    for (std::size_t i = 0; i < kTables; ++i) {
      if (done_[i].load(std::memory_order_relaxed) < total_bytes(i)) return false;
    }
    return true;
  }

  // Faults in the next stretch of table i if it is behind; true if it did.
  bool step(std::size_t i) {
    const Table& table = tables_[i];
    const std::size_t want =
        std::min(total_bytes(i),
                 used_[i].load(std::memory_order_relaxed) * table.element_bytes + kAheadBytes);
    const std::size_t done = done_[i].load(std::memory_order_relaxed);
    if (want <= done) return false;
    const std::size_t until = std::min(want, done + kAheadBytes);
    if (!populate(static_cast<std::byte*>(table.data) + done, until - done)) {
      unsupported_.store(true, std::memory_order_release);
      return false;
    }
    done_[i].store(until, std::memory_order_release);
    return true;
  }

  static bool populate(std::byte* begin, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto from = reinterpret_cast<std::uintptr_t>(begin) & ~(page - 1);
    const auto to = reinterpret_cast<std::uintptr_t>(begin) + bytes;
    return ::madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE) == 0;
#else
    (void)begin;  // Headers older than Linux 5.14: as if the kernel refused.
    (void)bytes;
    return false;
#endif
  }

  const std::array<Table, kTables> tables_;
  std::array<std::atomic<std::size_t>, kTables> used_{};
  std::array<std::atomic<std::size_t>, kTables> done_{};
  std::atomic<bool> unsupported_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dfl::sim
