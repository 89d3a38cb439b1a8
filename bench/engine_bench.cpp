// Engine benchmarks: what sharing with ownership costs over bare single flight.
//
// Three operations, each measured with 1e3 .. 1e6 live tasks already present
// (queued behind full transfer slots, as in a large prefetch backlog):
//   SubscribeCancel     subscribe a fresh key, then cancel that demand;
//   SharedFinish        three callers subscribe one fresh key, its transfer and
//                       install finish, all three are told;
//   SetPriorityChurn    set a random live demand to a random priority;
//   IndependentSameKey  the independent model (a task per demand) with 1 ..
//                       1e5 queued tasks of ONE popular key: subscribe it once
//                       more and cancel its oldest demand (whose task leaves the
//                       key's list from the far end, as the oldest one does
//                       when it finishes first).
// Implementations, all in the same binary and run:
//   demand       the scheduler core (this project's model);
//   callbacks    the same core under the legacy rules;
//   singleflight a hash map from key to a list of waiters, nothing else: the
//                shape of Go's x/sync singleflight. It has no priorities, so it
//                has no SetPriorityChurn.
// Every iteration also drains the outbox, as a runtime would.
//
// bench/ratios.py turns the JSON output into the table of docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "demandflight/engine/scheduler.h"

namespace {

using namespace dfl;

constexpr std::size_t kFreshKeys = 1024;  // Keys cycled through by the measured operations.
constexpr std::uint64_t kSize = 4'000'000;

ArtifactKey make_key(const char* kind, std::size_t i) {
  char resource[48];
  std::snprintf(resource, sizeof resource, "assets/%s/%07zu.ktx2", kind, i);
  return ArtifactKey{resource, "r42", "pc-bc7", 3};
}

// The baseline: single flight and nothing else.
class SingleFlightMap {
 public:
  using Waiters = std::vector<std::uint64_t>;

  std::uint64_t subscribe(const ArtifactKey& key) {
    const std::uint64_t id = ++last_id_;
    map_[key].push_back(id);
    return id;
  }
  void cancel(const ArtifactKey& key, std::uint64_t id) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    Waiters& waiters = it->second;
    for (auto w = waiters.begin(); w != waiters.end(); ++w) {
      if (*w == id) {
        waiters.erase(w);
        break;
      }
    }
    if (waiters.empty()) map_.erase(it);
  }
  // The call finished: every waiter is told.
  std::uint64_t finish(const ArtifactKey& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return 0;
    const Waiters waiters = std::move(it->second);
    map_.erase(it);
    std::uint64_t told = 0;
    for (std::uint64_t id : waiters)
      told += id;
    return told;
  }
  std::size_t size() const { return map_.size(); }

 private:
  std::unordered_map<ArtifactKey, Waiters> map_;
  std::uint64_t last_id_ = 0;
};

enum class Impl { demand, callbacks, singleflight };

// One populated world, kept across the benchmark's repeated calls (building
// 1e6 tasks each time would dominate the run).
struct World {
  Impl impl;
  std::size_t live = 0;
  std::unique_ptr<Scheduler> scheduler;
  SingleFlightMap singleflight;
  std::vector<DemandHandle> live_handles;
  std::vector<ArtifactKey> fresh;
  std::vector<Command> outbox;
  double now = 0;

  World(Impl which, std::size_t n) : impl(which), live(n) {
    for (std::size_t i = 0; i < kFreshKeys; ++i)
      fresh.push_back(make_key("fresh", i));
    if (impl == Impl::singleflight) {
      for (std::size_t i = 0; i < n; ++i)
        singleflight.subscribe(make_key("live", i));
      return;
    }
    SchedulerConfig config;
    config.model = impl == Impl::demand ? Model::demand : Model::callbacks;
    // Origin 0 holds the backlog and is saturated; origin 1 has one free slot,
    // so a fresh task on it starts at once.
    config.max_transfers = 9;
    config.max_per_origin = 8;
    config.cache_bytes = 64 * kSize;
    scheduler = std::make_unique<Scheduler>(config);
    live_handles.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      DemandOptions o;
      o.owner = i % 64;
      o.priority = static_cast<Priority>(i % 4);
      o.size_bytes = kSize;
      live_handles.push_back(scheduler->subscribe(now, make_key("live", i), o));
    }
    scheduler->take_commands(outbox);
  }
};

World& world(Impl impl, std::size_t n) {
  static std::unique_ptr<World> current;
  if (!current || current->impl != impl || current->live != n) {
    current.reset();  // Free the old world before building the next.
    current = std::make_unique<World>(impl, n);
  }
  return *current;
}

Impl impl_of(const benchmark::State& state) {
  return static_cast<Impl>(state.range(0));
}

void SubscribeCancel(benchmark::State& state) {
  World& w = world(impl_of(state), static_cast<std::size_t>(state.range(1)));
  std::size_t i = 0;
  DemandOptions o;
  o.owner = 7;
  o.priority = 2;
  o.origin = 0;
  o.size_bytes = kSize;
  for (auto _ : state) {
    const ArtifactKey& key = w.fresh[i++ % kFreshKeys];
    if (w.impl == Impl::singleflight) {
      const std::uint64_t id = w.singleflight.subscribe(key);
      w.singleflight.cancel(key, id);
    } else {
      const DemandHandle h = w.scheduler->subscribe(w.now, key, o);
      w.scheduler->cancel(w.now, h);
      w.scheduler->take_commands(w.outbox);
      benchmark::DoNotOptimize(w.outbox.data());
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void SharedFinish(benchmark::State& state) {
  World& w = world(impl_of(state), static_cast<std::size_t>(state.range(1)));
  std::size_t i = 0;
  DemandOptions o;
  o.origin = 1;
  o.size_bytes = kSize;
  std::uint64_t told = 0;
  for (auto _ : state) {
    const ArtifactKey& key = w.fresh[i++ % kFreshKeys];
    if (w.impl == Impl::singleflight) {
      w.singleflight.subscribe(key);
      w.singleflight.subscribe(key);
      w.singleflight.subscribe(key);
      told += w.singleflight.finish(key);
      continue;
    }
    Scheduler& s = *w.scheduler;
    for (OwnerId owner : {1, 2, 3}) {
      o.owner = owner;
      o.priority = static_cast<Priority>(owner);
      s.subscribe(w.now, key, o);
    }
    s.take_commands(w.outbox);
    TransferId transfer{};
    for (const Command& c : w.outbox) {
      if (const auto* start = std::get_if<StartTransfer>(&c)) transfer = start->transfer;
    }
    s.on_transfer_finished(w.now, transfer, TransferStatus::ok, kSize);
    s.take_commands(w.outbox);
    FinalizeId finalize{};
    for (const Command& c : w.outbox) {
      if (const auto* f = std::get_if<StartFinalize>(&c)) finalize = f->finalize;
    }
    s.on_finalize_finished(w.now, finalize, FinalizeStatus::installed);
    s.take_commands(w.outbox);
    told += w.outbox.size();
  }
  benchmark::DoNotOptimize(told);
  state.SetItemsProcessed(state.iterations());
}

void SetPriorityChurn(benchmark::State& state) {
  World& w = world(impl_of(state), static_cast<std::size_t>(state.range(1)));
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::size_t> pick(0, w.live_handles.size() - 1);
  std::uniform_int_distribution<Priority> priority(0, 3);
  for (auto _ : state) {
    w.scheduler->set_priority(w.now, w.live_handles[pick(rng)], priority(rng));
    w.scheduler->take_commands(w.outbox);
  }
  state.SetItemsProcessed(state.iterations());
}

void IndependentSameKey(benchmark::State& state) {
  SchedulerConfig config;
  config.model = Model::independent;
  config.max_transfers = 1;
  Scheduler s(config);
  std::vector<Command> outbox;
  DemandOptions o;
  o.size_bytes = kSize;
  s.subscribe(0, make_key("busy", 0), o);  // Holds the only slot: the rest queue.
  const ArtifactKey popular = make_key("popular", 0);
  std::deque<DemandHandle> handles;
  for (std::int64_t i = 0; i < state.range(0); ++i)
    handles.push_back(s.subscribe(0, popular, o));
  s.take_commands(outbox);
  for (auto _ : state) {
    handles.push_back(s.subscribe(0, popular, o));
    s.cancel(0, handles.front());
    handles.pop_front();
    s.take_commands(outbox);
    benchmark::DoNotOptimize(outbox.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void sizes(benchmark::internal::Benchmark* b, std::initializer_list<Impl> impls) {
  for (Impl impl : impls) {
    for (std::int64_t n : {1'000, 10'000, 100'000, 1'000'000}) {
      b->Args({static_cast<std::int64_t>(impl), n});
    }
  }
  b->ArgNames({"impl", "live"});
}

BENCHMARK(SubscribeCancel)->Apply([](auto* b) {
  sizes(b, {Impl::demand, Impl::callbacks, Impl::singleflight});
});
BENCHMARK(SharedFinish)->Apply([](auto* b) {
  sizes(b, {Impl::demand, Impl::callbacks, Impl::singleflight});
});
BENCHMARK(SetPriorityChurn)->Apply([](auto* b) { sizes(b, {Impl::demand, Impl::callbacks}); });
BENCHMARK(IndependentSameKey)->ArgName("same_key")->Arg(1)->Arg(1'000)->Arg(10'000)->Arg(100'000);

}  // namespace

BENCHMARK_MAIN();
