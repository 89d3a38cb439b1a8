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
#include <list>
#include <unordered_map>
#include <vector>

#include "demandflight/engine/artifact_key.h"

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

  std::uint64_t used_bytes() const { return used_bytes_; }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::size_t size() const { return lru_.size(); }

 private:
  // Entries live in the LRU list (most recent at the front); the map finds
  // them by the key's hash, so a lookup hashes the key once and compares keys
  // only on a hash match.
  struct Slot {
    KeyRef key;
    std::size_t key_hash = 0;
    std::uint64_t size_bytes = 0;
  };
  using Lru = std::list<Slot>;
  struct IdentityHash {
    std::size_t operator()(std::size_t h) const noexcept { return h; }
  };
  using Map = std::unordered_multimap<std::size_t, Lru::iterator, IdentityHash>;

  Map::iterator find(const ArtifactKey& key, std::size_t key_hash);
  Map::const_iterator find(const ArtifactKey& key, std::size_t key_hash) const;
  void evict_back(std::vector<Entry>& evicted);

  KeyIdentity::Hash hash_;
  KeyIdentity::Equal equal_;
  std::uint64_t capacity_bytes_;
  std::uint64_t used_bytes_ = 0;
  Map slots_;
  Lru lru_;
};

}  // namespace dfl
