#include "demandflight/engine/installed_index.h"
#include "random_test_seed.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <list>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace dfl {
namespace {

ArtifactKey k(const std::string& r, const std::string& rev = "r1") {
  return {r, rev, "pc", 0};
}

TEST(InstalledIndex, EvictsLeastRecentlyUsedUntilItFits) {
  InstalledIndex index(300, KeyIdentity{});
  std::vector<InstalledIndex::Entry> evicted;
  index.insert(k("a"), 100, evicted);
  index.insert(k("b"), 100, evicted);
  index.insert(k("c"), 100, evicted);
  EXPECT_TRUE(index.touch(k("a")));
  index.insert(k("d"), 150, evicted);  // Needs 150: b then c go.
  ASSERT_EQ(evicted.size(), 2u);
  EXPECT_EQ(evicted[0].key, k("b"));
  EXPECT_EQ(evicted[1].key, k("c"));
  EXPECT_EQ(index.used_bytes(), 250u);
  EXPECT_TRUE(index.contains(k("a")));
  EXPECT_TRUE(index.contains(k("d")));
}

TEST(InstalledIndex, AnArtifactLargerThanTheCapacityIsNotKept) {
  InstalledIndex index(100, KeyIdentity{});
  std::vector<InstalledIndex::Entry> evicted;
  index.insert(k("a"), 50, evicted);
  index.insert(k("huge"), 101, evicted);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, k("huge"));
  EXPECT_TRUE(index.contains(k("a"))) << "nothing else was evicted for it";
  EXPECT_FALSE(index.contains(k("huge")));
}

TEST(InstalledIndex, ReinsertingRefreshesSizeAndRecency) {
  InstalledIndex index(200, KeyIdentity{});
  std::vector<InstalledIndex::Entry> evicted;
  index.insert(k("a"), 100, evicted);
  index.insert(k("b"), 100, evicted);
  index.insert(k("a"), 50, evicted);
  EXPECT_EQ(index.used_bytes(), 150u);
  index.insert(k("c"), 100, evicted);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, k("b"));
}

TEST(InstalledIndex, EraseRemovesOneEntryAndItsBytes) {
  InstalledIndex index(300, KeyIdentity{});
  std::vector<InstalledIndex::Entry> evicted;
  index.insert(k("a"), 100, evicted);
  index.insert(k("b"), 100, evicted);
  EXPECT_TRUE(index.erase(k("a")));
  EXPECT_FALSE(index.erase(k("a")));
  EXPECT_FALSE(index.contains(k("a")));
  EXPECT_TRUE(index.contains(k("b")));
  EXPECT_EQ(index.used_bytes(), 100u);
  index.insert(k("c"), 200, evicted);  // Fits without evicting b: a's bytes are gone.
  EXPECT_TRUE(evicted.empty());
  index.insert(k("d"), 50, evicted);  // The LRU links survived the erase: b goes first.
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, k("b"));
}

TEST(InstalledIndex, FullIdentitySeparatesRevisionsResourceOnlyMergesThem) {
  std::vector<InstalledIndex::Entry> evicted;
  InstalledIndex full(1000, KeyIdentity{false});
  full.insert(k("a", "r1"), 10, evicted);
  EXPECT_FALSE(full.contains(k("a", "r2")));
  InstalledIndex legacy(1000, KeyIdentity{true});
  legacy.insert(k("a", "r1"), 10, evicted);
  EXPECT_TRUE(legacy.contains(k("a", "r2")));
}

// The index against the plainest LRU there is (a list, most recent first,
// searched from the front), on random inserts, refreshes, touches, erases and
// lookups over few keys, so that keys come back after eviction, tables grow,
// and deletions shift entries across the table's end. Evictions, their
// order, sizes and the used bytes must match at every step. DFL_SEED replays
// a failure; the seed is printed.
TEST(InstalledIndex, MatchesAPlainLruOnRandomOperations) {
  const std::uint64_t seed =
      dfl::testing::random_test_seed("InstalledIndex.MatchesAPlainLruOnRandomOperations");
  std::mt19937_64 random(seed);
  for (int round = 0; round < 20; ++round) {
    const std::uint64_t capacity = 200 + random() % 3000;
    const bool resource_only = round % 4 == 3;
    InstalledIndex index(capacity, KeyIdentity{resource_only});
    const KeyIdentity::Equal equal{resource_only};
    std::list<std::pair<ArtifactKey, std::uint64_t>> lru;  // Most recent first.
    std::uint64_t used = 0;
    const auto find = [&](const ArtifactKey& key) {
      for (auto it = lru.begin(); it != lru.end(); ++it)
        if (equal(it->first, key)) return it;
      return lru.end();
    };
    const int keys = 5 + static_cast<int>(random() % 200);
    for (int op = 0; op < 3000; ++op) {
      const std::uint64_t which = random() % keys;  // One draw per statement: the
      const std::uint64_t revision = random() % 2;  // same sequence on every compiler.
      const ArtifactKey key = k("res-" + std::to_string(which), "r" + std::to_string(revision));
      const int what = static_cast<int>(random() % 10);
      if (what < 5) {  // Insert or refresh.
        // Large entries (a few live at a time, now and then one past the
        // capacity) in some rounds, small ones (hundreds live) in the others.
        const std::uint64_t spread = round % 2 == 0 ? capacity / 4 : capacity / 300 + 1;
        const bool oversized = random() % 8 == 0;
        const std::uint64_t size = 1 + random() % (spread + (oversized ? capacity : 0));
        std::vector<InstalledIndex::Entry> evicted, expected;
        index.insert(key, size, evicted);
        if (size > capacity) {
          expected.push_back({KeyRef(key), size});
        } else {
          ArtifactKey kept = key;  // A refresh keeps the key first installed (resource-only
          if (auto it = find(key); it != lru.end()) {  // identity: another revision's).
            kept = it->first;
            used -= it->second;
            lru.erase(it);
          }
          lru.emplace_front(kept, size);
          used += size;
          while (used > capacity) {
            expected.push_back({KeyRef(lru.back().first), lru.back().second});
            used -= lru.back().second;
            lru.pop_back();
          }
        }
        ASSERT_EQ(evicted.size(), expected.size()) << "seed " << seed << " op " << op;
        for (std::size_t i = 0; i < evicted.size(); ++i) {
          ASSERT_EQ(evicted[i].key, expected[i].key) << "seed " << seed << " op " << op;
          ASSERT_EQ(evicted[i].size_bytes, expected[i].size_bytes) << "seed " << seed;
        }
      } else if (what < 8) {  // A hit refreshes recency.
        const auto it = find(key);
        ASSERT_EQ(index.touch(key), it != lru.end()) << "seed " << seed << " op " << op;
        if (it != lru.end()) lru.splice(lru.begin(), lru, it);
      } else if (what == 8) {  // The runtime found the bytes gone.
        const auto it = find(key);
        ASSERT_EQ(index.erase(key), it != lru.end()) << "seed " << seed << " op " << op;
        if (it != lru.end()) {
          used -= it->second;
          lru.erase(it);
        }
      } else {
        ASSERT_EQ(index.contains(key), find(key) != lru.end()) << "seed " << seed << " op " << op;
      }
      ASSERT_EQ(index.used_bytes(), used) << "seed " << seed << " op " << op;
      ASSERT_EQ(index.size(), lru.size()) << "seed " << seed << " op " << op;
    }
  }
}

}  // namespace
}  // namespace dfl
