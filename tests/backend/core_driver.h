// A fake driver for ClientCore (backend/src/client_core.h): no curl, no
// threads, no files. It plays the shells: keeps the transfers and finalizes
// the core started, the objects installed and the holds on them (each
// counted: a hold released twice, or dropped unreleased, is recorded), and
// every terminal delivered, by demand.
#pragma once

#include <cstdint>
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "../../backend/src/client_core.h"

namespace dfl::backend::testing {

struct FakeObjects final : ObjectStore {
  struct Ledger {
    int taken = 0;
    int released = 0;
    std::vector<std::string> errors;  // "released twice", "dropped while held".
  };
  class FakeHold final : public ObjectHold {
   public:
    FakeHold(std::shared_ptr<Ledger> ledger, std::string key)
        : ledger_(std::move(ledger)), key_(std::move(key)) {
      ++ledger_->taken;
    }
    ~FakeHold() override {
      if (!released_) ledger_->errors.push_back("hold on " + key_ + " dropped while held");
    }
    void release() override {
      if (released_) ledger_->errors.push_back("hold on " + key_ + " released twice");
      released_ = true;
      ++ledger_->released;
    }

   private:
    std::shared_ptr<Ledger> ledger_;
    std::string key_;
    bool released_ = false;
  };

  std::shared_ptr<Ledger> ledger = std::make_shared<Ledger>();
  std::map<std::string, ObjectFacts> installed;  // By resource.

  std::unique_ptr<ObjectHold> hold(const ArtifactKey& key) override {
    if (!installed.contains(key.resource)) return nullptr;
    return std::make_unique<FakeHold>(ledger, key.resource);
  }
  std::filesystem::path path(const ArtifactKey& key) const override {
    return "/objects/" + key.resource;
  }
  int held() const { return ledger->taken - ledger->released; }
};

inline ArtifactKey key_of(const std::string& resource) {
  ArtifactKey k;
  k.resource = resource;
  k.revision = "r1";
  k.target = "any";
  return k;
}

// The driver: the core, the fake world, and what came out.
struct CoreDriver {
  explicit CoreDriver(ClientCore::Options options = {})
      : pin_on_success(options.pin_on_success), core(std::move(options), objects) {}

  FakeObjects objects;  // Declared first: the core's holds end before it.
  bool pin_on_success;
  ClientCore core;
  double now = 0;

  struct Running {
    StartJob job;
  };
  std::map<std::uint64_t, Running> running;  // By transfer id.
  std::vector<FinalizeJob> finalizing;
  std::map<std::uint64_t, std::vector<DemandResult>> results;  // By demand number.
  std::vector<Job> other_jobs;  // Limits, forget, drop, throttle: kept for the tests.
  std::vector<std::string> evicted;
  std::uint64_t next_demand = 0;

  // A demand; its results land in results[number].
  std::uint64_t subscribe(const ArtifactRef& artifact, DemandOptions options = {},
                          DemandHandle* handle = nullptr) {
    const std::uint64_t number = next_demand++;
    std::optional<ObjectFacts> on_disk;
    std::unique_ptr<ObjectHold> held;
    if (auto it = objects.installed.find(artifact.key.resource); it != objects.installed.end()) {
      on_disk = it->second;
      if (pin_on_success) held = objects.hold(artifact.key);
    }
    const DemandHandle h = core.subscribe(
        now, artifact, options, [this, number](DemandResult r) { results[number].push_back(std::move(r)); },
        on_disk, std::move(held));
    if (handle != nullptr) *handle = h;
    run_jobs();
    return number;
  }

  // Runs the jobs the core made: deliveries call back at once.
  void run_jobs() {
    std::vector<Job> jobs;
    core.take_jobs(jobs);
    for (Job& job : jobs) {
      if (auto* s = std::get_if<StartJob>(&job)) {
        running[s->start.transfer.value] = Running{std::move(*s)};
      } else if (auto* a = std::get_if<AbortJob>(&job)) {
        if (running.erase(a->transfer.value) > 0)
          core.transfer_aborted(now, a->task, a->transfer, 0, -1.0);
      } else if (auto* f = std::get_if<FinalizeJob>(&job)) {
        finalizing.push_back(std::move(*f));
      } else if (auto* d = std::get_if<DeliverJob>(&job)) {
        if (d->callback) d->callback(std::move(d->result));
      } else if (auto* e = std::get_if<EvictJob>(&job)) {
        evicted.push_back(e->key.resource);
        objects.installed.erase(e->key.resource);
      } else {
        other_jobs.push_back(std::move(job));
      }
    }
  }

  // The transfer of `resource`'s task (the first running one), if any.
  std::optional<std::uint64_t> transfer_of(const std::string& resource) const {
    for (const auto& [id, r] : running) {
      if (r.job.start.key->resource == resource) return id;
    }
    return std::nullopt;
  }

  // Ends a running transfer (ok: the body is staged, complete).
  void end_transfer(std::uint64_t id, TransferStatus status, std::uint64_t bytes = 100,
                    const std::string& reason = {}) {
    const StartJob job = std::move(running.at(id).job);
    running.erase(id);
    TransferEnd end;
    end.transfer = job.start.transfer;
    end.task = job.start.task;
    end.status = status;
    end.bytes = bytes;
    end.key = *job.start.key;
    end.reason = reason;
    end.url = "http://origin/" + job.start.key->resource;
    core.transfer_ended(now, end);
    run_jobs();
  }

  // The first finalize of `resource`, taken from the queue.
  FinalizeJob take_finalize(const std::string& resource) {
    auto it = std::find_if(finalizing.begin(), finalizing.end(),
                           [&](const FinalizeJob& f) { return f.key.resource == resource; });
    FinalizeJob job = *it;
    finalizing.erase(it);
    return job;
  }

  // Finishes the first finalize of `resource` with a body of `size` and
  // digest `sha256`: the core decides; installed or refused.
  void finalize(const std::string& resource, std::uint64_t size, const std::string& sha256) {
    const FinalizeJob job = take_finalize(resource);
    if (auto refusal = core.decide_install(job.task, size, sha256)) {
      core.finalize_ended(now, job, size,
                          refusal->again ? FinalizeStatus::verify_failed : FinalizeStatus::error,
                          refusal->why);
    } else {
      objects.installed[resource] = ObjectFacts{size, sha256};
      core.finalize_ended(now, job, size, FinalizeStatus::installed, {});
    }
    run_jobs();
  }

  // Another process installed `resource` while its task waited: adopted.
  void adopt(const std::string& resource, std::uint64_t size, const std::string& sha256) {
    const FinalizeJob job = take_finalize(resource);
    objects.installed[resource] = ObjectFacts{size, sha256};
    core.adopted(job.task, ObjectFacts{size, sha256}, objects.hold(job.key));
    core.finalize_ended(now, job, 0, FinalizeStatus::installed, {});
    run_jobs();
  }

  // Time passes: the engine's timers (retries, deadlines) fire.
  void advance(double seconds) {
    now += seconds;
    if (auto wake = core.next_wakeup_s(); wake && *wake <= now) {
      core.on_timer(now);
      run_jobs();
    }
  }
};

// 64 hex digits from a short tag: "a" -> "aaaa...".
inline std::string digest(char c) { return std::string(64, c); }

}  // namespace dfl::backend::testing
