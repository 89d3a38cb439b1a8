// HashSlots (the engine's open-addressing hash -> slot table) against a
// std::multimap on random inserts, lookups and erases. Hashes are drawn from a
// small set, so that many entries share a hash, probe runs are long and wrap
// around the table's end, and erases shift entries back across it. DFL_SEED
// replays a failure; the seed is printed.
#include "demandflight/engine/detail/hash_slots.h"
#include "random_test_seed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <utility>

namespace dfl::detail {
namespace {

TEST(HashSlots, EntriesWithOneHashAreFoundByTheirSlot) {
  HashSlots table;
  table.insert(7, 1);
  table.insert(7, 2);
  table.insert(9, 3);
  EXPECT_EQ(table.size(), 3u);
  const std::size_t two = table.find(7, [](std::uint32_t s) { return s == 2; });
  ASSERT_NE(two, HashSlots::kNotFound);
  EXPECT_EQ(table.slot_at(two), 2u);
  EXPECT_EQ(table.find(7, [](std::uint32_t s) { return s == 3; }), HashSlots::kNotFound);
  table.erase(two);
  EXPECT_EQ(table.find(7, [](std::uint32_t s) { return s == 2; }), HashSlots::kNotFound);
  EXPECT_NE(table.find(7, [](std::uint32_t s) { return s == 1; }), HashSlots::kNotFound);
  EXPECT_NE(table.find(9, [](std::uint32_t) { return true; }), HashSlots::kNotFound);
}

TEST(HashSlots, MatchesAMultimapOnRandomOperations) {
  const std::uint64_t seed =
      dfl::testing::random_test_seed("HashSlots.MatchesAMultimapOnRandomOperations");
  std::mt19937_64 random(seed);
  for (int round = 0; round < 20; ++round) {
    HashSlots table;
    std::multimap<std::size_t, std::uint32_t> reference;
    std::set<std::uint32_t> live;
    std::uint32_t next_slot = 0;
    const std::uint64_t hashes = 1 + random() % 64;  // Few: collisions and clusters.
    // Small tables in odd rounds: runs there often wrap around the end.
    const int target = 1 + static_cast<int>(random() % (round % 2 == 1 ? 12 : 300));
    for (int op = 0; op < 2000; ++op) {
      const std::size_t hash = random() % hashes * 0x100000001ull;
      const bool add =
          static_cast<int>(reference.size()) < target ? random() % 3 != 0 : random() % 3 == 0;
      if (add) {
        table.insert(hash, next_slot);
        reference.emplace(hash, next_slot);
        live.insert(next_slot++);
      } else if (!live.empty()) {
        // Erase a random live slot, found through its hash.
        auto pick = live.begin();
        std::advance(pick, static_cast<long>(random() % live.size()));
        const std::uint32_t slot = *pick;
        std::size_t its_hash = 0;
        for (auto it = reference.begin(); it != reference.end(); ++it) {
          if (it->second == slot) {
            its_hash = it->first;
            reference.erase(it);
            break;
          }
        }
        const std::size_t at = table.find(its_hash, [slot](std::uint32_t s) { return s == slot; });
        ASSERT_NE(at, HashSlots::kNotFound) << "seed " << seed << " op " << op;
        table.erase(at);
        live.erase(pick);
      }
      ASSERT_EQ(table.size(), reference.size()) << "seed " << seed << " op " << op;
      // Every hash finds exactly its slots, and no others.
      std::multiset<std::uint32_t> seen;
      for (std::uint64_t h = 0; h < hashes; ++h) {
        const std::size_t key = h * 0x100000001ull;
        const auto [first, last] = reference.equal_range(key);
        for (auto it = first; it != last; ++it) {
          const std::uint32_t want = it->second;
          ASSERT_NE(table.find(key, [want](std::uint32_t s) { return s == want; }),
                    HashSlots::kNotFound)
              << "seed " << seed << " op " << op << ": slot " << want << " lost";
        }
      }
      table.for_each([&](std::size_t h, std::uint32_t s) {
        seen.insert(s);
        EXPECT_TRUE(reference.count(h) > 0) << "seed " << seed;
      });
      ASSERT_EQ(seen.size(), live.size()) << "seed " << seed << " op " << op;
      ASSERT_TRUE(std::equal(seen.begin(), seen.end(), live.begin())) << "seed " << seed;
    }
  }
}

}  // namespace
}  // namespace dfl::detail
