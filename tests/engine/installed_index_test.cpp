#include "demandflight/engine/installed_index.h"

#include <gtest/gtest.h>

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

TEST(InstalledIndex, FullIdentitySeparatesRevisionsResourceOnlyMergesThem) {
  std::vector<InstalledIndex::Entry> evicted;
  InstalledIndex full(1000, KeyIdentity{false});
  full.insert(k("a", "r1"), 10, evicted);
  EXPECT_FALSE(full.contains(k("a", "r2")));
  InstalledIndex legacy(1000, KeyIdentity{true});
  legacy.insert(k("a", "r1"), 10, evicted);
  EXPECT_TRUE(legacy.contains(k("a", "r2")));
}

}  // namespace
}  // namespace dfl
