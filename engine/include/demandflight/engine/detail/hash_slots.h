// HashSlots: an open-addressing table from a key's hash to a slot number.
//
// The engine files keys by their hash (computed once per key, Scheduler::
// key_hash) and keeps what it knows of a key in its own slabs; it needs a map
// from hash to slab index that allocates nothing per entry and whose lookup
// touches one cache line, not a bucket array, a node and a list node as the
// node-based standard maps do. The engine depends on the standard library
// only, so this is that map: linear probing over {hash, slot} pairs, at most
// half full, with backward-shift deletion (no tombstones). Several entries may
// share a hash; a lookup takes a predicate that tells the wanted slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace dfl::detail {

class HashSlots {
 public:
  static constexpr std::uint32_t kEmpty = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t kNotFound = std::numeric_limits<std::size_t>::max();

  // The position of the first entry with `hash` whose slot satisfies
  // `match(slot)`, or kNotFound.
  template <class Match>
  std::size_t find(std::size_t hash, Match&& match) const {
    if (size_ == 0) return kNotFound;
    for (std::size_t i = home(hash);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.slot == kEmpty) return kNotFound;
      if (e.hash == hash && match(e.slot)) return i;
    }
  }

  std::uint32_t slot_at(std::size_t position) const { return table_[position].slot; }
  void set_slot_at(std::size_t position, std::uint32_t slot) { table_[position].slot = slot; }

  // Adds an entry (another one with the same hash may exist).
  void insert(std::size_t hash, std::uint32_t slot) {
    if (2 * (size_ + 1) > table_.size()) grow();
    place(hash, slot);
    ++size_;
  }

  // Removes the entry at `position` (from find); other positions may move.
  void erase(std::size_t position) {
    // Backward shift: pull later entries of the probe run into the hole
    // unless their home lies cyclically after the hole.
    std::size_t hole = position;
    for (std::size_t i = (hole + 1) & mask_; table_[i].slot != kEmpty; i = (i + 1) & mask_) {
      const std::size_t h = home(table_[i].hash);
      const bool stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i);
      if (stays) continue;
      table_[hole] = table_[i];
      hole = i;
    }
    table_[hole] = Entry{};
    --size_;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Calls f(hash, slot) for every entry, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const Entry& e : table_) {
      if (e.slot != kEmpty) f(e.hash, e.slot);
    }
  }

 private:
  struct Entry {
    std::size_t hash = 0;
    std::uint32_t slot = kEmpty;
  };

  // Fibonacci hashing: the top bits of hash * 2^64/phi, so that hashes whose
  // low bits agree still spread.
  std::size_t home(std::size_t hash) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(hash) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }

  void place(std::size_t hash, std::uint32_t slot) {
    std::size_t i = home(hash);
    while (table_[i].slot != kEmpty)
      i = (i + 1) & mask_;
    table_[i] = Entry{hash, slot};
  }

  void grow() {
    std::vector<Entry> old = std::move(table_);
    const std::size_t capacity = old.empty() ? 16 : 2 * old.size();
    table_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1)
      --shift_;
    for (const Entry& e : old) {
      if (e.slot != kEmpty) place(e.hash, e.slot);
    }
  }

  std::vector<Entry> table_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace dfl::detail
