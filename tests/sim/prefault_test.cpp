// The simulator's Prefaulter: the pages of a growing table are faulted in by
// its thread a bounded stretch ahead of the part in use, and their contents
// are left alone. Residency is read with mincore(2). Built as its own
// executable so that the ThreadSanitizer build runs it too (make tsan).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "prefault.h"

namespace dfl::testing {
namespace {

using sim::Prefaulter;

// A fresh anonymous mapping, unmapped at the end: none of its pages is
// resident until something touches it.
struct Mapping {
  explicit Mapping(std::size_t n) : bytes(n) {
    data = static_cast<std::byte*>(
        ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (data == MAP_FAILED) data = nullptr;
    // Small pages, so that residency is counted page by page.
    if (data != nullptr) ::madvise(data, n, MADV_NOHUGEPAGE);
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(data, bytes);
  }
  std::size_t resident(std::size_t from, std::size_t to) const {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((to - from + page - 1) / page);
    if (::mincore(data + from, to - from, in.data()) != 0) return 0;
    std::size_t count = 0;
    for (unsigned char c : in)
      count += c & 1u;
    return count * page;
  }
  std::byte* data = nullptr;
  std::size_t bytes = 0;
};

// Waits (up to 10 s) until the thread has faulted in at least `bytes`.
bool wait_for(const Prefaulter& prefault, std::size_t table, std::size_t bytes) {
  for (int i = 0; i < 10000 && prefault.populated_bytes(table) < bytes && !prefault.unsupported();
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return prefault.populated_bytes(table) >= bytes;
}

TEST(Prefaulter, FaultsInABoundedStretchAheadOfTheTablesUse) {
  constexpr std::size_t kMiB = 1u << 20;
  Mapping table(64 * kMiB);
  ASSERT_NE(table.data, nullptr);
  ASSERT_EQ(table.resident(0, table.bytes), 0u);
  {
    Prefaulter prefault({Prefaulter::Table{table.data, 1, table.bytes}, Prefaulter::Table{}});
    ASSERT_TRUE(wait_for(prefault, 0, Prefaulter::kAheadBytes) || prefault.unsupported());
    if (prefault.unsupported()) GTEST_SKIP() << "no MADV_POPULATE_WRITE on this kernel";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // Time to run further.
    EXPECT_EQ(prefault.populated_bytes(0), Prefaulter::kAheadBytes) << "nothing in use yet";
    EXPECT_EQ(table.resident(0, Prefaulter::kAheadBytes), Prefaulter::kAheadBytes);
    EXPECT_EQ(table.resident(Prefaulter::kAheadBytes, table.bytes), 0u)
        << "nothing beyond the stretch ahead";

    prefault.used(0, 40 * kMiB);  // The table fills up: the stretch follows.
    ASSERT_TRUE(wait_for(prefault, 0, 40 * kMiB + Prefaulter::kAheadBytes));
    EXPECT_EQ(table.resident(0, 56 * kMiB), 56 * kMiB);
    EXPECT_EQ(table.resident(56 * kMiB, table.bytes), 0u);

    prefault.used(0, table.bytes);  // Never past the table's end.
    ASSERT_TRUE(wait_for(prefault, 0, table.bytes));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(prefault.populated_bytes(0), table.bytes);
  }
  EXPECT_EQ(table.resident(0, table.bytes), table.bytes);
}

TEST(Prefaulter, LeavesWhatTheTableHoldsAlone) {
  constexpr std::size_t kBytes = 8u << 20;
  Mapping table(kBytes);
  ASSERT_NE(table.data, nullptr);
  std::memset(table.data, 0x5a, 4096 * 3 + 100);  // Written before, partly.
  {
    Prefaulter prefault({Prefaulter::Table{}, Prefaulter::Table{table.data, 4096, kBytes / 4096}});
    prefault.used(1, kBytes / 4096);
    ASSERT_TRUE(wait_for(prefault, 1, kBytes) || prefault.unsupported());
    if (prefault.unsupported()) GTEST_SKIP() << "no MADV_POPULATE_WRITE on this kernel";
  }
  EXPECT_EQ(table.resident(0, kBytes), kBytes) << "faulted in";
  for (std::size_t i = 0; i < kBytes; ++i) {
    const auto expected = i < 4096 * 3 + 100 ? std::byte{0x5a} : std::byte{0};
    ASSERT_EQ(table.data[i], expected) << "byte " << i;
  }
}

}  // namespace
}  // namespace dfl::testing
