// demandflight replay TRACE --base-url URL --cache DIR [--speed X]
//
// Replays a trace in real time against a real server through the production
// Client, and writes the same result JSON as `demandflight sim`: the same
// ResultRecorder scores both, so one trace can be run in both worlds and
// compared demand by demand.
//
// Time: record times and timeouts are divided by --speed on the way in, and
// every time in the result is multiplied by it on the way out (the network
// itself is not sped up). Faults: a client cannot make a real server fail, so
// fault records are counted and skipped; inject faults at the server (the
// loopback test server, or `tc` for the network).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "backend_commands.h"
#include "demandflight/engine/config.h"
#include "demandflight/policies/registry.h"
#include "demandflight/format/defaults.h"
#include "demandflight/format/recorder.h"
#include "demandflight/format/result.h"

namespace dfl::cli {
namespace {

// Feeds the recorder from the client's observer calls (all made under the
// client's engine lock, so the recorder needs no lock of its own).
class Recording : public backend::ClientObserver {
 public:
  Recording(const format::Trace& trace, format::ResultRecorder& recorder, double speed)
      : trace_(trace), recorder_(recorder), speed_(speed) {}

  void start(double client_t) { t0_ = client_t; }
  double trace_time(double client_t) const { return (client_t - t0_) * speed_; }
  // The record the replay thread is about to subscribe (that thread alone
  // subscribes, and on_subscribe runs inside its call).
  void expect(const format::Record* record) { pending_ = record; }

  void on_subscribe(double t, DemandHandle, const backend::ArtifactRef&, const DemandOptions&,
                    std::optional<TaskId>) override {
    recorder_.before_subscribe(trace_time(t), *pending_);
  }
  void on_command(double t, const Command& command) override {
    if (std::holds_alternative<StartTransfer>(command)) recorder_.transfer_started();
    dispatch(command, [&](const auto& c) { recorder_.on(trace_time(t), c); });
  }
  void on_settled(double t) override { recorder_.after_commands(trace_time(t)); }
  void on_transfer_ended(double, TaskId task, TransferId, std::uint64_t bytes,
                         bool aborted) override {
    recorder_.transfer_bytes(task, bytes);
    if (aborted) recorder_.attempt_aborted(task, bytes);
  }
  void on_finalize_ended(double, TaskId, FinalizeStatus status, std::uint64_t bytes) override {
    if (status == FinalizeStatus::verify_failed) recorder_.wasted(bytes);
  }

 private:
  const format::Trace& trace_;
  format::ResultRecorder& recorder_;
  double speed_ = 1;
  double t0_ = 0;
  const format::Record* pending_ = nullptr;
};

struct ReplayArgs {
  ServerArgs server;
  std::string trace, out, model = "demand", policy = "always-abort";
  double speed = 1;
  std::uint32_t max_transfers = 0, max_per_origin = 0;
  std::optional<std::uint64_t> seed;
  bool quiet = false;
};

// The client's options for the replay: the trace's scheduler (its times
// divided by --speed) with the overrides given, and the server's.
backend::ClientOptions replay_options(const ReplayArgs& args, const format::Trace& trace,
                                      Model model) {
  backend::ClientOptions options;
  SchedulerConfig& c = options.scheduler;
  c.model = model;
  c.max_transfers = args.max_transfers != 0 ? args.max_transfers : trace.scheduler.max_transfers;
  c.max_per_origin =
      args.max_per_origin != 0 ? args.max_per_origin : trace.scheduler.max_per_origin;
  c.cache_bytes = trace.scheduler.cache_bytes;
  c.retry =
      RetryConfig{trace.scheduler.retry_max_attempts, trace.scheduler.retry_base_s / args.speed,
                  trace.scheduler.retry_cap_s / args.speed, trace.scheduler.retry_jitter};
  c.breaker = BreakerConfig{trace.scheduler.breaker_failures,
                            trace.scheduler.breaker_open_s / args.speed};
  c.seed = args.seed.value_or(trace.seed);
  options.throttle = trace.scheduler.throttle;
  c.max_origins =
      static_cast<std::uint32_t>(std::max<std::size_t>(trace.platform.origins.size(), 1));
  options.orphan_policy = args.policy;
  apply_server_options(args.server, trace, options);
  options.resolver = base_url_resolver(args.server.base_url, trace);
  options.pin_on_success = false;  // It only downloads.
  return options;
}

// What a replay's client left when it was done.
struct ReplayEnd {
  double t_end = 0;  // The client's clock.
  std::size_t faults_skipped = 0;
  std::uint64_t ignored_cancels = 0, ignored_set_priorities = 0;
  backend::RecordStatus record_status;
};

// Plays a trace's records into a client at their times (divided by --speed),
// and waits for every demand to end and the client to be idle.
class Player {
 public:
  Player(const format::Trace& trace, double speed, Recording& recording)
      : trace_(trace), speed_(speed), recording_(recording) {}

  // The whole trace, through a client made with `options`; what it left.
  ReplayEnd run(const backend::ClientOptions& options) {
    ReplayEnd end;
    {
      backend::Client client(options);
      const double start = client.clock_s();
      recording_.start(start);
      std::vector<DemandHandle> handles(trace_.demand_ids.size());
      using Clock = std::chrono::steady_clock;
      // The client's clock first, then the wall clock: wall0 may come out late by
      // the gap between the two reads, never early (no record goes before its time).
      const double elapsed = client.clock_s() - start;
      const auto wall0 = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(elapsed));
      for (const format::Record& r : trace_.records) {
        std::this_thread::sleep_until(wall0 + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(r.t / speed_)));
        play(client, r, handles);
      }
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return outstanding_ == 0; });
      }
      // Orphans still completing are part of the run, as in the simulator.
      while (!client.idle())
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      end.t_end = client.clock_s();
      const SchedulerStats stats = client.stats();
      end.ignored_cancels = stats.stale_cancels_ignored;
      end.ignored_set_priorities = stats.stale_priority_changes_ignored;
      end.record_status = client.end_recording();
    }  // The client's threads are joined: the recorder is ours alone now.
    end.faults_skipped = faults_skipped_;
    return end;
  }

 private:
  // One record, as the client's call it stands for (a fault: counted, skipped).
  void play(backend::Client& client, const format::Record& r, std::vector<DemandHandle>& handles) {
    switch (r.op) {
      case format::Op::subscribe:
        handles[r.demand] = subscribe(client, r);
        break;
      case format::Op::cancel:
        client.cancel(handles[r.demand]);
        break;
      case format::Op::set_priority:
        client.set_priority(handles[r.demand], r.priority);
        break;
      case format::Op::end_owner:
        client.end_owner(r.owner, r.has_generation
                                      ? std::optional<OwnerGeneration>(r.owner_generation)
                                      : std::nullopt);
        break;
      case format::Op::fault:
        ++faults_skipped_;
        break;
      case format::Op::throttle:
        // Caps are of the real network, which --speed does not speed up.
        client.set_throttle(trace_.throttles[r.fault]);
        break;
    }
  }

  // A subscribe, outstanding until its callback comes.
  DemandHandle subscribe(backend::Client& client, const format::Record& r) {
    const format::Artifact& a = trace_.artifacts[r.artifact];
    DemandOptions o;
    o.owner = r.owner;
    o.owner_generation = r.owner_generation;
    o.priority = r.priority;
    if (r.has_timeout()) o.deadline_s = client.clock_s() + r.timeout_s / speed_;
    {
      std::lock_guard lock(mutex_);
      ++outstanding_;
    }
    recording_.expect(&r);
    return client.subscribe(artifact_ref(a), o, [&](DemandOutcome) {
      std::lock_guard lock(mutex_);
      if (--outstanding_ == 0) cv_.notify_all();
    });
  }

  const format::Trace& trace_;
  double speed_ = 1;
  Recording& recording_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t outstanding_ = 0;  // Subscribed, and not yet ended (under mutex_).
  std::size_t faults_skipped_ = 0;
};

int run_replay(const ReplayArgs& args) {
  const format::Trace trace = format::read_trace(args.trace);
  policies::make_orphan_policy(args.policy);     // std::invalid_argument on a bad spec.
  const Model model = *parse_model(args.model);  // Checked by the option.
  std::ofstream out;
  if (!args.out.empty()) {
    out.open(args.out);
    if (!out) {
      std::fprintf(stderr, "demandflight replay: cannot write %s\n", args.out.c_str());
      return 1;
    }
  }

  backend::ClientOptions options = replay_options(args, trace, model);
  format::ResultRecorder recorder(trace, std::string(to_string(model)), args.policy,
                               args.seed.value_or(trace.seed));
  Recording recording(trace, recorder, args.speed);
  options.observer = &recording;

  Player player(trace, args.speed, recording);
  const ReplayEnd end = player.run(options);
  recorder.ignored(end.ignored_cancels, end.ignored_set_priorities);
  const format::Result result = recorder.finish(recording.trace_time(end.t_end));

  if (out.is_open()) {
    format::write_result_json(result, trace, out);
    out.close();
    if (!out) {
      std::fprintf(stderr, "demandflight replay: writing %s failed\n", args.out.c_str());
      return 1;
    }
  }
  if (!args.quiet) format::print_summary(result, trace, "replayed (trace time)", stdout);
  if (end.faults_skipped > 0) {
    std::fprintf(stderr,
                 "demandflight replay: %zu fault records skipped (a real server's faults are "
                 "injected at the server)\n",
                 end.faults_skipped);
  }
  return report_recording("replay", args.server, end.record_status) ? 0 : 1;
}

}  // namespace

Subcommand add_replay_command(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  auto* c = app.add_subcommand(
      "replay", "replay a trace in real time against a real server; write the result JSON");
  c->add_option("TRACE", args->trace, "trace file (.jsonl)")->required();
  add_server_options(*c, args->server);
  c->add_option("--speed", args->speed, "replay X times faster than the trace's clock")
      ->check(CLI::Range(1e-3, 1e6))
      ->capture_default_str();
  c->add_option("--model", args->model, "demand | callbacks | independent")
      ->check(CLI::IsMember(model_names()))
      ->capture_default_str();
  c->add_option("--policy", args->policy, "orphan policy NAME[:k=v,...]")->capture_default_str();
  c->add_option("--seed", args->seed, "seed (default: the trace's)");
  c->add_option("--max-transfers", args->max_transfers, "override scheduler.max_transfers")
      ->check(CLI::Range(1u, format::defaults::max_transfers_limit));
  c->add_option("--max-per-origin", args->max_per_origin, "override scheduler.max_per_origin")
      ->check(CLI::Range(1u, format::defaults::max_transfers_limit));
  c->add_option("--out", args->out, "write the result JSON here");
  c->add_flag("--quiet", args->quiet, "print nothing on success");
  return Subcommand{c, [args] { return run_replay(*args); }};
}

}  // namespace dfl::cli
