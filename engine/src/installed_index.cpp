#include "demandflight/engine/installed_index.h"

namespace dfl {

InstalledIndex::InstalledIndex(std::uint64_t capacity_bytes, KeyIdentity identity)
    : hash_(identity.hash()), equal_(identity.equal()), capacity_bytes_(capacity_bytes) {}

// A key shared with the index (the task's own KeyRef, or a caller's that the
// task shared) is found without comparing strings.
InstalledIndex::Map::iterator InstalledIndex::find(const ArtifactKey& key, std::size_t key_hash) {
  auto [first, last] = slots_.equal_range(key_hash);
  for (auto it = first; it != last; ++it) {
    const ArtifactKey* held = it->second->key.get();
    if (held == &key || equal_(*held, key)) return it;
  }
  return slots_.end();
}

InstalledIndex::Map::const_iterator InstalledIndex::find(const ArtifactKey& key,
                                                         std::size_t key_hash) const {
  auto [first, last] = slots_.equal_range(key_hash);
  for (auto it = first; it != last; ++it) {
    const ArtifactKey* held = it->second->key.get();
    if (held == &key || equal_(*held, key)) return it;
  }
  return slots_.end();
}

bool InstalledIndex::touch(const ArtifactKey& key, std::size_t key_hash) {
  if (slots_.empty()) return false;
  auto it = find(key, key_hash);
  if (it == slots_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second);
  return true;
}

bool InstalledIndex::contains(const ArtifactKey& key) const {
  return find(key, hash_(key)) != slots_.end();
}

void InstalledIndex::insert(const KeyRef& key, std::size_t key_hash, std::uint64_t size_bytes,
                            std::vector<Entry>& evicted) {
  if (size_bytes > capacity_bytes_) {
    // Larger than the whole index: installed, used once, never kept.
    evicted.push_back(Entry{key, size_bytes});
    return;
  }
  auto it = find(*key, key_hash);
  if (it == slots_.end()) {
    lru_.push_front(Slot{key, key_hash, size_bytes});
    slots_.emplace(key_hash, lru_.begin());
  } else {
    Slot& slot = *it->second;
    used_bytes_ -= slot.size_bytes;
    slot.size_bytes = size_bytes;
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  used_bytes_ += size_bytes;
  while (used_bytes_ > capacity_bytes_)
    evict_back(evicted);
}

void InstalledIndex::evict_back(std::vector<Entry>& evicted) {
  Slot& slot = lru_.back();
  auto it = find(*slot.key, slot.key_hash);
  slots_.erase(it);
  used_bytes_ -= slot.size_bytes;
  evicted.push_back(Entry{std::move(slot.key), slot.size_bytes});
  lru_.pop_back();
}

}  // namespace dfl
