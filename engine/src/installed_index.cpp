#include "demandflight/engine/installed_index.h"

namespace dfl {

InstalledIndex::InstalledIndex(std::uint64_t capacity_bytes, KeyIdentity identity)
    : capacity_bytes_(capacity_bytes), slots_(16, identity.hash(), identity.equal()) {}

bool InstalledIndex::touch(const ArtifactKey& key) {
  auto it = slots_.find(key);
  if (it == slots_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second.lru_position);
  return true;
}

bool InstalledIndex::contains(const ArtifactKey& key) const { return slots_.contains(key); }

void InstalledIndex::insert(const ArtifactKey& key, std::uint64_t size_bytes,
                            std::vector<Entry>& evicted) {
  if (size_bytes > capacity_bytes_) {
    // Larger than the whole index: installed, used once, never kept.
    evicted.push_back(Entry{key, size_bytes});
    return;
  }
  auto [it, inserted] = slots_.try_emplace(key);
  if (inserted) {
    lru_.push_front(&it->first);
    it->second.lru_position = lru_.begin();
  } else {
    used_bytes_ -= it->second.size_bytes;
    lru_.splice(lru_.begin(), lru_, it->second.lru_position);
  }
  it->second.size_bytes = size_bytes;
  used_bytes_ += size_bytes;
  while (used_bytes_ > capacity_bytes_) evict_back(evicted);
}

void InstalledIndex::evict_back(std::vector<Entry>& evicted) {
  const ArtifactKey* key = lru_.back();
  auto it = slots_.find(*key);
  evicted.push_back(Entry{it->first, it->second.size_bytes});
  used_bytes_ -= it->second.size_bytes;
  lru_.pop_back();
  slots_.erase(it);
}

}  // namespace dfl
