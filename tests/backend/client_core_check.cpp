// ClientCore against a reference, as the engine's model-based test and
// exhaustive check are (docs/testing.md): sequences of callers' calls and
// shells' events run on the fake driver (core_driver.h), every terminal
// and every hold checked as it happens, and at the end:
//
// - each demand gets exactly one terminal;
// - a demand never succeeds after it ended (its cancel, its owner's end),
//   nor when its own expectation contradicts the installed bytes;
// - a success carries a pin exactly when pins are on, on the object;
// - an owner's end releases exactly its pins of that generation and older;
// - every hold on an object is released exactly once, and none is left.
//
//   client_core_check --random N [--seed S] [--steps K]   N random sequences
//   client_core_check --depth D                           every sequence of D steps
//
// Randomized runs print their seed; a failing sequence prints its own seed
// (or its steps) and the violation, and the program exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core_driver.h"

namespace dfl::backend {
namespace {

using testing::CoreDriver;
using testing::digest;
using testing::key_of;

struct Violation {
  std::string what;
};

struct Body {
  std::uint64_t size;
  char tag;
};
constexpr Body kBodies[] = {{100, 'a'}, {100, 'b'}, {120, 'c'}};

struct Expectation {
  std::uint64_t size = 0;
  std::optional<char> tag;
};
constexpr Expectation kExpectations[] = {{0, std::nullopt}, {100, std::nullopt}, {0, 'a'}, {0, 'b'}};

// One sequence: the driver, and what the reference knows of each demand.
class Run {
 public:
  explicit Run(bool pins) : d_(options(pins)) {}

  struct Demand {
    std::string resource;
    Expectation expect;
    OwnerId owner = 0;
    OwnerGeneration generation = 0;
    DemandHandle handle;
    bool ended = false;  // Cancelled or its owner ended before its terminal.
    int terminals = 0;
  };

  // Actions. Each is a no-op where it does not apply.
  void subscribe(int resource, int expectation, OwnerId owner, OwnerGeneration generation) {
    Demand dm;
    dm.resource = resource == 0 ? "k" : "m";
    dm.expect = kExpectations[expectation];
    dm.owner = owner;
    dm.generation = generation;
    ArtifactRef a;
    a.key = key_of(dm.resource);
    a.size_bytes = dm.expect.size;
    if (dm.expect.tag) a.sha256 = digest(*dm.expect.tag);
    DemandOptions o;
    o.owner = owner;
    o.owner_generation = generation;
    o.priority = static_cast<Priority>(demands_.size() % 3);
    const std::size_t number = demands_.size();
    demands_.push_back(dm);
    std::optional<ObjectFacts> on_disk;
    std::unique_ptr<ObjectHold> held;
    if (auto it = d_.objects.installed.find(dm.resource); it != d_.objects.installed.end()) {
      on_disk = it->second;
      if (d_.pin_on_success) held = d_.objects.hold(a.key);
    }
    demands_[number].handle = d_.core.subscribe(
        d_.now, a, o, [this, number](DemandResult r) { terminal(number, std::move(r)); }, on_disk,
        std::move(held));
    d_.run_jobs();
  }
  void cancel(std::size_t which) {
    if (demands_.empty()) return;
    Demand& dm = demands_[which % demands_.size()];
    if (dm.terminals == 0) dm.ended = true;
    d_.core.cancel(d_.now, dm.handle);
    d_.run_jobs();
  }
  void end_owner(OwnerId owner, std::optional<OwnerGeneration> generation) {
    for (Demand& dm : demands_) {
      if (dm.owner == owner && dm.terminals == 0 && (!generation || dm.generation <= *generation))
        dm.ended = true;
    }
    d_.core.end_owner(d_.now, owner, generation);
    d_.run_jobs();
    for (Pinned& p : pins_) {
      if (p.owner == owner && (!generation || p.generation <= *generation)) p.released = true;
      check(p.released == !p.pin, "an owner's end released a pin it does not cover, or kept one it covers");
    }
  }
  void transfer_ends(std::size_t which, TransferStatus status) {
    if (d_.running.empty()) return;
    auto it = d_.running.begin();
    std::advance(it, which % d_.running.size());
    d_.end_transfer(it->first, status, status == TransferStatus::ok ? 100 : 10, "HTTP 503");
  }
  void finalize(std::size_t which, int body) {
    if (d_.finalizing.empty()) return;
    const std::string resource = d_.finalizing[which % d_.finalizing.size()].key.resource;
    d_.finalize(resource, kBodies[body].size, digest(kBodies[body].tag));
  }
  void adopt(std::size_t which, int body) {
    if (d_.finalizing.empty()) return;
    const std::string resource = d_.finalizing[which % d_.finalizing.size()].key.resource;
    d_.adopt(resource, kBodies[body].size, digest(kBodies[body].tag));
  }
  // Another process installs, or evicts (only what nobody holds).
  void install_elsewhere(int resource, int body) {  // An immutable key: once.
    d_.objects.installed.try_emplace(resource == 0 ? "k" : "m",
                                     ObjectFacts{kBodies[body].size, digest(kBodies[body].tag)});
  }
  void evict_elsewhere(int resource) {
    const std::string r = resource == 0 ? "k" : "m";
    for (const Pinned& p : pins_) {
      if (p.resource == r && p.pin) return;
    }
    if (d_.objects.held() == 0) d_.objects.installed.erase(r);
  }
  void advance(double seconds) { d_.advance(seconds); }
  void release_pin(std::size_t which) {
    if (pins_.empty()) return;
    Pinned& p = pins_[which % pins_.size()];
    p.pin.release();
    p.released = true;
  }

  // The end: every demand gets its terminal; every hold goes, once.
  void finish() {
    d_.core.cancel_all(d_.now);
    d_.run_jobs();
    for (std::size_t i = 0; i < demands_.size(); ++i)
      check(demands_[i].terminals == 1, "demand " + std::to_string(i) + " got " +
                                            std::to_string(demands_[i].terminals) + " terminals");
    pins_.clear();
    // The core lets go of what it holds when it goes; the driver's own
    // finalizes and transfers hold nothing.
    check(d_.objects.ledger->errors.empty(),
          d_.objects.ledger->errors.empty() ? "" : d_.objects.ledger->errors.front());
  }
  std::shared_ptr<testing::FakeObjects::Ledger> ledger() const { return d_.objects.ledger; }

 private:
  static ClientCore::Options options(bool pins) {
    ClientCore::Options o;
    o.pin_on_success = pins;
    o.scheduler.retry.max_attempts = 3;
    return o;
  }

  struct Pinned {
    Pin pin;
    std::string resource;
    OwnerId owner = 0;
    OwnerGeneration generation = 0;
    bool released = false;
  };

  void check(bool ok, const std::string& what) {
    if (!ok) throw Violation{what};
  }

  void terminal(std::size_t number, DemandResult r) {
    Demand& dm = demands_[number];
    ++dm.terminals;
    check(dm.terminals == 1, "demand " + std::to_string(number) + " got a second terminal");
    if (r.outcome != DemandOutcome::succeeded) return;
    check(!dm.ended, "demand " + std::to_string(number) + " succeeded after it ended");
    auto it = d_.objects.installed.find(dm.resource);
    check(it != d_.objects.installed.end(),
          "demand " + std::to_string(number) + " succeeded with nothing installed");
    Expect e{dm.expect.size, std::nullopt};
    if (dm.expect.tag) e.sha256 = digest(*dm.expect.tag);
    check(!contradiction(e, it->second.size, it->second.sha256),
          "demand " + std::to_string(number) + " succeeded on bytes its own expectation contradicts");
    check(static_cast<bool>(r.pin) == d_.pin_on_success,
          "a success carries a pin exactly when pins are on");
    if (r.pin) {
      check(r.pin.path() == "/objects/" + dm.resource, "a pin on another object");
      pins_.push_back(Pinned{std::move(r.pin), dm.resource, dm.owner, dm.generation, false});
    }
  }

  CoreDriver d_;
  std::vector<Demand> demands_;
  std::vector<Pinned> pins_;
};

// The exhaustive check's alphabet: one step each.
constexpr int kActions = 14;
void step(Run& run, int action) {
  switch (action) {
    case 0: run.subscribe(0, 0, 1, 1); break;
    case 1: run.subscribe(0, 2, 2, 1); break;
    case 2: run.subscribe(0, 3, 1, 2); break;
    case 3: run.subscribe(1, 1, 2, 2); break;
    case 4: run.cancel(0); break;
    case 5: run.end_owner(1, 1); break;
    case 6: run.transfer_ends(0, TransferStatus::ok); break;
    case 7: run.transfer_ends(0, TransferStatus::retryable_error); break;
    case 8: run.finalize(0, 0); break;
    case 9: run.finalize(0, 1); break;
    case 10: run.adopt(0, 0); break;
    case 11: run.advance(10); break;
    case 12: run.release_pin(0); break;
    case 13: run.install_elsewhere(0, 1); break;
  }
}

void random_step(Run& run, std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  switch (pick(13)) {
    case 0:
    case 1:
    case 2: run.subscribe(pick(2), pick(4), 1 + pick(2), 1 + pick(2)); break;
    case 3: run.cancel(rng()); break;
    case 4: run.end_owner(1 + pick(2), pick(3) == 0 ? std::nullopt : std::optional<OwnerGeneration>(1 + pick(2))); break;
    case 5: run.transfer_ends(rng(), TransferStatus::ok); break;
    case 6: run.transfer_ends(rng(), pick(2) ? TransferStatus::retryable_error : TransferStatus::permanent_error); break;
    case 7: run.finalize(rng(), pick(3)); break;
    case 8: run.adopt(rng(), pick(3)); break;
    case 9: run.advance(pick(2) ? 0.5 : 20); break;
    case 10: run.release_pin(rng()); break;
    case 11: run.install_elsewhere(pick(2), pick(3)); break;
    case 12: run.evict_elsewhere(pick(2)); break;
  }
}

// Runs one sequence; the violation's words, or empty.
template <typename Steps>
std::string attempt(bool pins, Steps&& steps) {
  std::shared_ptr<testing::FakeObjects::Ledger> ledger;
  try {
    Run run(pins);
    ledger = run.ledger();
    steps(run);
    run.finish();
  } catch (const Violation& v) {
    return v.what;
  }
  // The core is gone: whatever it held, it let go of, once.
  if (!ledger->errors.empty()) return ledger->errors.front();
  if (ledger->taken != ledger->released)
    return std::to_string(ledger->taken - ledger->released) + " holds never released";
  return {};
}

int exhaustive(int depth) {
  std::vector<int> seq(depth, 0);
  std::uint64_t sequences = 0;
  for (bool pins : {true, false}) {
    std::fill(seq.begin(), seq.end(), 0);
    for (;;) {
      const std::string why = attempt(pins, [&](Run& run) {
        for (int a : seq)
          step(run, a);
      });
      ++sequences;
      if (!why.empty()) {
        std::printf("violated: %s\n  pins %s, steps:", why.c_str(), pins ? "on" : "off");
        for (int a : seq)
          std::printf(" %d", a);
        std::printf("\n");
        return 1;
      }
      int i = depth - 1;
      while (i >= 0 && ++seq[i] == kActions) seq[i--] = 0;
      if (i < 0) break;
    }
  }
  std::printf("every sequence of %d steps over %d actions, pins on and off: %llu sequences, no violation\n",
              depth, kActions, static_cast<unsigned long long>(sequences));
  return 0;
}

int randomized(int sequences, std::uint64_t base, int steps) {
  std::printf("seed %llu (replay: --seed %llu)\n", static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base));
  for (int i = 0; i < sequences; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    std::mt19937_64 rng(seed);
    const bool pins = (seed & 1) != 0;
    const std::string why = attempt(pins, [&](Run& run) {
      for (int s = 0; s < steps; ++s)
        random_step(run, rng);
    });
    if (!why.empty()) {
      std::printf("violated: %s\n  in the sequence of seed %llu (replay: --seed %llu --random 1)\n",
                  why.c_str(), static_cast<unsigned long long>(seed),
                  static_cast<unsigned long long>(seed));
      return 1;
    }
  }
  std::printf("%d sequences of %d steps: no violation\n", sequences, steps);
  return 0;
}

}  // namespace
}  // namespace dfl::backend

int main(int argc, char** argv) {
  int random = 0, depth = 0, steps = 60;
  std::uint64_t seed = std::random_device{}();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--random") == 0) random = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--depth") == 0) depth = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "client_core_check: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (random == 0 && depth == 0) {
    std::fprintf(stderr, "usage: client_core_check --random N [--seed S] [--steps K] | --depth D\n");
    return 2;
  }
  int failed = 0;
  if (depth > 0) failed |= dfl::backend::exhaustive(depth);
  if (random > 0) failed |= dfl::backend::randomized(random, seed, steps);
  return failed;
}
