#include "demandflight/engine/installed_index.h"

namespace dfl {

InstalledIndex::InstalledIndex(std::uint64_t capacity_bytes, KeyIdentity identity)
    : hash_(identity.hash()), equal_(identity.equal()), capacity_bytes_(capacity_bytes) {}

// A key shared with the index (the task's own KeyRef, or a caller's that the
// task shared) is found without comparing strings.
std::size_t InstalledIndex::find(const ArtifactKey& key, std::size_t key_hash) const {
  return table_.find(key_hash, [&](std::uint32_t s) {
    const ArtifactKey* held = slots_[s].key.get();
    return held == &key || equal_(*held, key);
  });
}

void InstalledIndex::unlink(std::uint32_t s) {
  Slot& slot = slots_[s];
  (slot.newer != kNone ? slots_[slot.newer].older : newest_) = slot.older;
  (slot.older != kNone ? slots_[slot.older].newer : oldest_) = slot.newer;
  slot.newer = slot.older = kNone;
}

void InstalledIndex::link_newest(std::uint32_t s) {
  Slot& slot = slots_[s];
  slot.newer = kNone;
  slot.older = newest_;
  (newest_ != kNone ? slots_[newest_].newer : oldest_) = s;
  newest_ = s;
}

bool InstalledIndex::touch(const ArtifactKey& key, std::size_t key_hash) {
  const std::size_t at = find(key, key_hash);
  if (at == detail::HashSlots::kNotFound) return false;
  const std::uint32_t s = table_.slot_at(at);
  if (s != newest_) {
    unlink(s);
    link_newest(s);
  }
  return true;
}

bool InstalledIndex::contains(const ArtifactKey& key) const {
  return find(key, hash_(key)) != detail::HashSlots::kNotFound;
}

void InstalledIndex::insert(const KeyRef& key, std::size_t key_hash, std::uint64_t size_bytes,
                            std::vector<Entry>& evicted) {
  if (size_bytes > capacity_bytes_) {
    // Larger than the whole index: installed, used once, never kept.
    evicted.push_back(Entry{key, size_bytes});
    return;
  }
  const std::size_t at = find(*key, key_hash);
  if (at == detail::HashSlots::kNotFound) {
    std::uint32_t s = free_;
    if (s != kNone) {
      free_ = slots_[s].newer;
    } else {
      s = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& slot = slots_[s];
    slot.key = key;
    slot.key_hash = key_hash;
    slot.size_bytes = size_bytes;
    link_newest(s);
    table_.insert(key_hash, s);
  } else {
    // A refresh keeps the key first installed (under resource-only identity,
    // another revision's).
    const std::uint32_t s = table_.slot_at(at);
    used_bytes_ -= slots_[s].size_bytes;
    slots_[s].size_bytes = size_bytes;
    if (s != newest_) {
      unlink(s);
      link_newest(s);
    }
  }
  used_bytes_ += size_bytes;
  while (used_bytes_ > capacity_bytes_)
    evict_oldest(evicted);
}

void InstalledIndex::evict_oldest(std::vector<Entry>& evicted) {
  const std::uint32_t s = oldest_;
  Slot& slot = slots_[s];
  evicted.push_back(Entry{slot.key, slot.size_bytes});
  free_slot(s, table_.find(slot.key_hash, [s](std::uint32_t t) { return t == s; }));
}

bool InstalledIndex::erase(const ArtifactKey& key) {
  const std::size_t at = find(key, hash_(key));
  if (at == detail::HashSlots::kNotFound) return false;
  free_slot(table_.slot_at(at), at);
  return true;
}

// Takes slot `s`, found at table position `at`, out of the index.
void InstalledIndex::free_slot(std::uint32_t s, std::size_t at) {
  Slot& slot = slots_[s];
  table_.erase(at);
  unlink(s);
  used_bytes_ -= slot.size_bytes;
  slot.key = KeyRef{};
  slot.newer = free_;
  free_ = s;
}

}  // namespace dfl
