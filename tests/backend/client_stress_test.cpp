// Eight threads do random subscribe, cancel, set_priority and end_owner on one
// client while transfers complete, fail and resume underneath; every demand
// must receive exactly one terminal. Run under ThreadSanitizer by `make tsan`.
// The seed is printed; DFL_SEED reproduces each thread's operation mix.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "demandflight/backend/client.h"
#include "loopback.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kThreads = 8;
constexpr int kOpsPerThread = 150;
constexpr int kFiles = 6;

TEST(ClientStress, EightThreadsOfRandomCallsGiveEveryDemandExactlyOneTerminal) {
  std::uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("DFL_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::printf("client stress: DFL_SEED=%llu\n", static_cast<unsigned long long>(seed));

  const fs::path dir = fs::temp_directory_path() / ("dfl-stress-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "www");
  for (int i = 0; i < kFiles; ++i) {
    std::ofstream(dir / "www" / (std::to_string(i) + ".bin")) << std::string(50'000 * (i + 1), 'x');
  }
  LoopbackServer server(dir / "www");
  server.rate(20'000'000);
  server.faults({{{"path", "/2.bin"}, {"kind", "drop"}, {"after_bytes", 30'000}, {"count", 3}},
                 {{"path", "/4.bin"}, {"kind", "status"}, {"status", 503}, {"count", 2}}});

  // One counter per subscribe, numbered as they happen.
  static std::array<std::atomic<int>, kThreads * kOpsPerThread> terminals{};
  for (auto& t : terminals)
    t = 0;
  std::atomic<int> subscribed{0};
  std::atomic<int> delivered{0};
  {
    backend::ClientOptions o;
    o.cache_dir = dir / "cache";
    o.resolver = backend::url_template(server.base() + "/{resource}");
    o.scheduler.max_transfers = 3;
    o.scheduler.max_per_origin = 3;
    o.scheduler.cache_bytes = 400'000;  // Small: evictions and refetches happen.
    o.scheduler.retry = RetryConfig{4, 0.02, 0.1, 0.2};
    o.orphan_policy = "always-complete";
    backend::Client client(std::move(o));

    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(seed * kThreads + static_cast<std::uint64_t>(t));
        std::vector<DemandHandle> mine;
        for (int op = 0; op < kOpsPerThread; ++op) {
          const int what = static_cast<int>(rng() % 10);
          if (what < 5 || mine.empty()) {
            const int f = static_cast<int>(rng() % kFiles);
            backend::ArtifactRef ref;
            ref.key = ArtifactKey{std::to_string(f) + ".bin", "r1", "pc", 0};
            ref.size_bytes = 50'000ull * static_cast<std::uint64_t>(f + 1);
            DemandOptions opts;
            opts.owner = rng() % 4;
            opts.owner_generation = static_cast<OwnerGeneration>(rng() % 2);
            opts.priority = static_cast<Priority>(rng() % 4);
            if (rng() % 5 == 0) opts.deadline_s = 0.05 * static_cast<double>(rng() % 10);
            const int n = subscribed++;
            mine.push_back(client.subscribe(ref, opts, [&, n](DemandOutcome) {
              ++terminals[static_cast<std::size_t>(n)];
              ++delivered;
            }));
          } else if (what < 7) {
            client.cancel(mine[rng() % mine.size()]);
          } else if (what < 9) {
            client.set_priority(mine[rng() % mine.size()], static_cast<Priority>(rng() % 4));
          } else {
            const OwnerId owner = rng() % 4;
            if (rng() % 2 == 0) {
              client.end_owner(owner);
            } else {
              client.end_owner(owner, static_cast<OwnerGeneration>(rng() % 2));
            }
          }
          if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
    for (auto& th : threads)
      th.join();
    // Let what still runs finish on its own before the client goes.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (delivered.load() < subscribed.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }  // ~Client cancels whatever still waits: each gets its terminal now.

  ASSERT_EQ(delivered.load(), subscribed.load()) << "DFL_SEED=" << seed;
  for (int n = 0; n < subscribed.load(); ++n) {
    ASSERT_EQ(terminals[static_cast<std::size_t>(n)].load(), 1)
        << "demand #" << n << ", DFL_SEED=" << seed;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dfl::testing
