// InstalledIndex: which artifacts are installed, bounded by bytes, LRU.
//
// A subscribe whose key is here succeeds without a transfer. Inserting past the
// capacity evicts the least recently used entries; an artifact larger than the
// whole capacity is not kept at all (it is reported as evicted at once).
//
// Keys are compared through a KeyIdentity so that the callbacks model can
// reproduce the legacy "resource name only" identity with the same index.
#pragma once

#include <cstdint>
#include <vector>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/detail/hash_slots.h"

namespace dfl {

// Which fields of an ArtifactKey make an identity. The demand and independent
// models use all four; the callbacks model uses the resource name only.
struct KeyIdentity {
  bool resource_only = false;

  struct Hash {
    bool resource_only = false;
    std::size_t operator()(const ArtifactKey& key) const noexcept;
  };
  struct Equal {
    bool resource_only = false;
    bool operator()(const ArtifactKey& a, const ArtifactKey& b) const noexcept;
  };
  Hash hash() const { return Hash{resource_only}; }
  Equal equal() const { return Equal{resource_only}; }
};

class InstalledIndex {
 public:
  struct Entry {
    KeyRef key;
    std::uint64_t size_bytes = 0;
  };

  InstalledIndex(std::uint64_t capacity_bytes, KeyIdentity identity);

  // The hash this index uses for `key` (it depends on the identity). Callers
  // that look a key up in several places compute it once and pass it along.
  std::size_t hash(const ArtifactKey& key) const { return hash_(key); }

  // True if `key` is installed; marks it most recently used.
  bool touch(const ArtifactKey& key) { return touch(key, hash(key)); }
  bool touch(const ArtifactKey& key, std::size_t key_hash);
  bool contains(const ArtifactKey& key) const;

  // Installs (or refreshes) `key` and appends what had to leave to `evicted`.
  // The index shares the key: it copies no strings.
  void insert(const ArtifactKey& key, std::uint64_t size_bytes, std::vector<Entry>& evicted) {
    insert(KeyRef(key), size_bytes, evicted);
  }
  void insert(const KeyRef& key, std::uint64_t size_bytes, std::vector<Entry>& evicted) {
    insert(key, hash(*key), size_bytes, evicted);
  }
  void insert(const KeyRef& key, std::size_t key_hash, std::uint64_t size_bytes,
              std::vector<Entry>& evicted);

  // Removes `key` if it is here (the runtime found its bytes gone); true if it was.
  bool erase(const ArtifactKey& key);

  std::uint64_t used_bytes() const { return used_bytes_; }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::size_t size() const { return table_.size(); }

 private:
  // Entries live in a slab of slots, linked from the most to the least
  // recently used; `table_` finds them by the key's hash, so a lookup hashes
  // the key once, compares keys only on a hash match (by pointer first: a
  // shared KeyRef), and nothing is allocated per entry.
  static constexpr std::uint32_t kNone = detail::HashSlots::kEmpty;
  struct Slot {
    KeyRef key;  // Empty while the slot is free.
    std::size_t key_hash = 0;
    std::uint64_t size_bytes = 0;
    std::uint32_t newer = kNone;  // Towards newest_; the free list's link when free.
    std::uint32_t older = kNone;  // Towards oldest_.
  };

  std::size_t find(const ArtifactKey& key, std::size_t key_hash) const;
  void unlink(std::uint32_t s);
  void link_newest(std::uint32_t s);
  void evict_oldest(std::vector<Entry>& evicted);
  void free_slot(std::uint32_t s, std::size_t at);

  KeyIdentity::Hash hash_;
  KeyIdentity::Equal equal_;
  std::uint64_t capacity_bytes_;
  std::uint64_t used_bytes_ = 0;
  std::vector<Slot> slots_;
  std::uint32_t free_ = kNone;
  std::uint32_t newest_ = kNone;
  std::uint32_t oldest_ = kNone;
  detail::HashSlots table_;
};

}  // namespace dfl
