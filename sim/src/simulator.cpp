// The SimGrid runtime for the scheduler core (actorless: everything happens in
// SimGrid timers and activity-completion callbacks run by maestro).
//
// Mapping:
//   trace record at t      -> a SimGrid timer at t (one armed at a time, chained)
//   engine next_wakeup()   -> a SimGrid timer; a stale one just calls on_timer
//   StartTransfer          -> Comm origin->client of the bytes still missing
//   AbortTransfer          -> Comm::cancel(); bytes done read before cancelling
//   StartFinalize          -> hashing at hash_Bps, then a disk write at
//                             disk_write_Bps, each stage shared fairly by the
//                             finalizes on it (processor sharing, computed
//                             here, exactly, and caught up on at each SimGrid
//                             event: Stage below), or SimGrid Execs on the
//                             client and disk hosts with
//                             SimOptions::finalize_execs
// Faults: transfer_error shortens the next attempts' comms to after_fraction of
// their bytes and reports an error; corrupt makes the next completed transfers
// fail verification; origin_down fails that origin's running transfers at once
// and fails every transfer that starts while it is down after one round trip
// (a refused connection).
#include <absl/container/flat_hash_map.h>
#include <xbt/config.hpp>
#include <xbt/log.h>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "demandflight/engine/scheduler.h"
#include "demandflight/policies/registry.h"
#include "demandflight/format/defaults.h"
#include "demandflight/sim/oracle.h"
#include "demandflight/format/recorder.h"
#include "demandflight/format/score.h"
#include "demandflight/sim/simulator.h"
#include "demandflight/sim/tcp_connections.h"
#include "decision_log.h"
#include "timeline.h"

namespace dfl::sim {
using namespace dfl::format;  // The trace, the result and the recorder.
namespace {

namespace sg4 = simgrid::s4u;
using simgrid::kernel::timer::Timer;

struct Transfer {
  sg4::CommPtr comm;  // Null when the transfer fails without a comm (origin down).
  TaskId task;
  std::uint32_t key = 0;
  std::uint32_t origin = 0;
  std::uint64_t payload = 0;  // Bytes this attempt carries.
  bool fails = false;         // A transfer_error fault: report an error at the end.
  bool retryable = true;
  double started_s = 0;
  int slot = -1;  // Timeline lane.
  // The tcp network model: on a connection of the pool (TcpConnections), and
  // still in its handshake or slow-start delay (no comm yet).
  bool on_connection = false;
  bool connecting = false;
  // Throttling: its comm runs to the client's background host (through the
  // background link, whose bandwidth is the background cap while it applies).
  bool via_background = false;
};

struct Finalize {
  FinalizeId id;
  TaskId task;
  std::uint64_t size = 0;
  bool corrupt = false;
  bool hashing = true;  // Else writing.
  sg4::ExecPtr exec;    // With SimOptions::finalize_execs only.
  double started_s = 0;
  int lane = -1;
};

// A resource a finalize passes through (the CPU that hashes, the disk that
// writes), shared fairly by the finalizes on it: with n of them, each
// advances at speed / n, as SimGrid shares a host between its Execs. The
// sharing is computed here, exactly: an Exec per finalize cost SimGrid
// thousands of instructions each (LMM variables, lazy updates, the activity),
// and a timer per finalize a step of its own.
//
// Each finalize on the stage is tagged, as it enters, with the service every
// finalize present will have received when it leaves: its finish tag, the
// stage's `served` then plus its bytes. `served` grows at speed / n while n
// finalizes share the stage, so the smallest tag leaves first, at
// served_at + (tag - served) * n / speed.
//
// Nothing SimGrid does depends on when a finalize leaves: an install only
// tells demands their outcome, evicts, and ends its task (it frees no
// transfer slot and changes no queue, so it neither starts nor aborts a
// transfer). So no SimGrid timer marks it: at each SimGrid event, before
// anything else, the finalizes that left since the last one are finished, in
// time order, each at its own virtual time (catch_up), and the rest at the
// end of the run. A corrupt body is the exception (a failed verification may
// retry at once): while one is on a stage, a timer wakes the simulation at
// each leaving (arm_wake). A transfer started or aborted by a finalize that
// is finished after its time would be a bug: the runtime stops with an error.
//
// SimOptions::finalize_execs runs every stage as SimGrid Execs instead; the
// times agree (SimFidelity.ConcurrentFinalizes*,
// SimFidelity.SharedStagesGiveTheSameResultsAsExecs).
struct Stage {
  sg4::Host* host = nullptr;  // Its Execs' host (finalize_execs).
  double speed = 0;
  // Processor sharing (without finalize_execs).
  struct Job {
    double tag;  // Finish tag (bytes of service).
    std::uint64_t id;
    bool operator>(const Job& other) const {
      return tag != other.tag ? tag > other.tag : id > other.id;
    }
  };
  std::priority_queue<Job, std::vector<Job>, std::greater<>> jobs;
  double served = 0;     // Service each finalize present has had since the stage was last idle,
  double served_at = 0;  // as of this time.
};

struct KeyFaults {
  std::uint32_t transfer_errors = 0;
  double after_fraction = 0.5;
  bool retryable = true;
  std::uint32_t corrupt = 0;
};

class Simulation {
 public:
  Simulation(const Trace& trace, const SimOptions& options, TraceStream* stream = nullptr,
             RowSink* rows = nullptr)
      : trace_(trace),
        stream_(stream),
        options_(options),
        recorder_(trace, std::string(to_string(options.model)), options.policy,
                  options.seed.value_or(trace.seed)),
        policy_(make_policy()),
        decisions_(options.decisions_path.empty()
                       ? nullptr
                       : std::make_unique<DecisionLog>(trace, recorder_,
                                                       options.decision_horizon_s)),
        scheduler_(make_config(), decisions_ ? decisions_->tap(policy_) : policy_) {
    // Orphan policies see exactly what a transfer has received when they decide.
    scheduler_.set_progress_probe([this](TransferId id) -> std::uint64_t {
      auto it = transfers_.find(id.value);
      return it == transfers_.end() ? 0 : bytes_done(it->second);
    });
    if (stream_ != nullptr) recorder_.stream_rows(*rows, *stream_);
  }

  Result run() {
    if (!options_.timeline_path.empty()) timeline_.enable();
    build_platform();
    if (client_background_ == nullptr &&
        (trace_.scheduler.throttle != ThrottleConfig{} || !trace_.throttles.empty()))
      throw std::invalid_argument(kNoThrottleUnderNs3);
    set_throttle(trace_.scheduler.throttle);
    handle_of_demand_.assign(trace_.demand_ids.size(), DemandHandle{});
    subscribe_as_.reserve(trace_.artifacts.size());
    add_artifacts();
    if (!options_.transfer_log_path.empty()) {
      transfer_log_.open(options_.transfer_log_path);
      if (!transfer_log_) throw std::runtime_error("cannot write " + options_.transfer_log_path);
      transfer_log_.precision(17);  // Exact start times: the replay must match them.
    }

    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) {
      if (stopped_) return;
      enter();
      on_completion(a);
    });
    if (stream_ != nullptr) {
      has_next_ = stream_->next(next_);
      if (has_next_) wake_for_records(next_.t);
    } else if (!trace_.records.empty()) {
      wake_for_records(trace_.records.front().t);
    }
    engine_->run();
    if (failure_) std::rethrow_exception(failure_);  // A bad line stopped a streamed run.
    enter();
    // Finalizes still on a stage when SimGrid has nothing left to do.
    catch_up(std::numeric_limits<double>::infinity());
    return finish();
  }

 private:
  // --- Set-up ---------------------------------------------------------------

  SchedulerConfig make_config() const {
    SchedulerConfig c;
    c.model = options_.model;
    c.max_transfers = options_.max_transfers.value_or(trace_.scheduler.max_transfers);
    c.max_per_origin = options_.max_per_origin.value_or(trace_.scheduler.max_per_origin);
    c.cache_bytes = trace_.scheduler.cache_bytes;
    c.retry = RetryConfig{trace_.scheduler.retry_max_attempts, trace_.scheduler.retry_base_s,
                          trace_.scheduler.retry_cap_s, trace_.scheduler.retry_jitter};
    c.breaker = BreakerConfig{trace_.scheduler.breaker_failures, trace_.scheduler.breaker_open_s};
    c.seed = options_.seed.value_or(trace_.seed);
    c.max_origins =
        static_cast<std::uint32_t>(std::max<std::size_t>(trace_.platform.origins.size(), 1));
    return c;
  }

  std::shared_ptr<OrphanPolicy> make_policy() const {
    if (options_.policy_object) return options_.policy_object;
    return make_sim_policy(options_.policy, trace_, options_.oracle_bases);
  }

  void build_platform() {
    static bool engine_created = false;
    if (engine_created) {
      throw std::logic_error("SimGrid allows one simulation per process: run each in its own");
    }
    engine_created = true;
    static int argc = 2;
    static char arg0[] = "demandflight";
    static char arg1[] = "--log=root.thresh:critical";
    static char* argv[] = {arg0, arg1, nullptr};
    const NetworkModel network = options_.network_model.value_or(trace_.platform.network_model);
    options_network_ = network;
    if (network == NetworkModel::ns3 && std::getenv("NS_ATTRIBUTE_DEFAULT") == nullptr) {
      throw std::invalid_argument(
          "the ns3 network model needs NS_ATTRIBUTE_DEFAULT in the environment before SimGrid is "
          "loaded (demandflight and Python set it; a program linking the simulator calls "
          "dfl::sim::prepare_ns3_environment() first thing in main)");
    }
    engine_ = std::make_unique<sg4::Engine>(&argc, argv);
    for (const std::string& setting : simgrid_settings(network)) engine_->set_config(setting);
    for (const std::string& setting : options_.simgrid_config)
      engine_->set_config(setting);
    const Platform& p = trace_.platform;
    if (network == NetworkModel::tcp &&
        options_.tcp_sharing.value_or(TcpSharing::round_trip) == TcpSharing::equal) {
      // Equal shares: the origins' links carry no latency (CM02 weighs a flow
      // by its route's latency); each transfer waits for it instead, scaled as
      // CM02 scales it. CM02's window bound (TCP-gamma / round trip) goes with
      // the latency, and SimGrid 3.32 ignores a rate set on a host-to-host
      // comm: a flow from an origin is bounded by the links alone
      // (TcpModel.WithEqualSharingALongFatPathIsNotBoundByTheWindow).
      equal_latency_factor_ = simgrid::config::get_value<double>("network/latency-factor");
      equal_shares_ = true;
    }
    auto* zone = sg4::create_full_zone("world");
    client_ = zone->create_host("client", p.hash_Bps);
    disk_ = zone->create_host("client-disk", p.disk_write_Bps);
    hashing_.host = client_;
    hashing_.speed = p.hash_Bps;
    writing_.host = disk_;
    writing_.speed = p.disk_write_Bps;
    auto* client_link = zone->create_link("client-link", p.client_bandwidth_Bps);
    client_link->set_latency(p.client_latency_s);
    client_link->seal();
    client_link_ = client_link;
    // Throttling (docs/design.md, *Background throttling*): background
    // transfers end at a host of their own behind one more link, which
    // carries the background cap while it applies and is unlimited otherwise;
    // the overall cap is the client link's bandwidth. Not under ns-3, whose
    // links cannot change.
    if (network != NetworkModel::ns3) {
      client_background_ = zone->create_host("client-background", p.hash_Bps);
      background_link_ = zone->create_link("background-link", kUnlimitedBps);
      background_link_->set_latency(0);
      background_link_->seal();
    }
    // ns-3 builds its nodes and point-to-point links from the routes of one
    // link only: each origin's link to a gateway, and the client's link from
    // it (ns-3's own routing then finds origin -> gateway -> client). It
    // ignores the two-link routes, which the flow models use.
    simgrid::kernel::routing::NetPoint* gateway = nullptr;
    if (network == NetworkModel::ns3) {
      gateway = zone->create_router("gateway");
      zone->add_route(client_->get_netpoint(), gateway, nullptr, nullptr,
                      {sg4::LinkInRoute(client_link)}, true);
    }
    for (const OriginSpec& origin : p.origins) {
      sg4::Host* host = zone->create_host("origin-" + origin.name, 1e9);
      auto* link = zone->create_link("link-" + origin.name, origin.bandwidth_Bps);
      link->set_latency(equal_shares_ ? 0 : origin.latency_s);
      link->seal();
      zone->add_route(host->get_netpoint(), client_->get_netpoint(), nullptr, nullptr,
                      {sg4::LinkInRoute(link), sg4::LinkInRoute(client_link)}, true);
      if (client_background_ != nullptr) {
        zone->add_route(host->get_netpoint(), client_background_->get_netpoint(), nullptr, nullptr,
                        {sg4::LinkInRoute(link), sg4::LinkInRoute(client_link),
                         sg4::LinkInRoute(background_link_)},
                        true);
      }
      if (gateway != nullptr) {
        zone->add_route(host->get_netpoint(), gateway, nullptr, nullptr, {sg4::LinkInRoute(link)},
                        true);
      }
      origin_hosts_.push_back(host);
      origin_down_until_.push_back(-1);
    }
    zone->seal();
    ns3_ = network == NetworkModel::ns3;
    // ns-3 fills its routing tables when it hears that the platform is made,
    // which SimGrid announces after loading an XML platform, but not after
    // one built in code: it is announced here.
    if (ns3_) sg4::Engine::on_platform_created();
    if (network == NetworkModel::tcp) {
      TcpSettings tcp;
      tcp.restart_after_idle =
          options_.server_congestion_control.value_or(p.server_congestion_control) ==
          format::ServerCongestionControl::cubic;
      tcp_ = std::make_unique<TcpConnections>(static_cast<std::uint32_t>(p.origins.size()), tcp);
    }
  }

  // Virtual time stands still inside a callback: it is read once as SimGrid
  // calls in (enter), not at each of the dozen uses per event.
  double now() const { return now_; }
  void enter() {
    clock_ = sg4::Engine::get_clock();
    catch_up(clock_);
    now_ = clock_;
  }

  // --- Trace records -------------------------------------------------------

  // A streamed run met a bad line (`failure`): nothing more happens. Every
  // callback returns at once from now on, so that SimGrid runs out of events
  // (the transfers under way finish on their own, the timers fire empty) and
  // run() returns normally and throws the failure: unwinding out of SimGrid's
  // engine mid-run would destroy activities it still runs.
  void stop(std::exception_ptr failure) {
    stopped_ = true;
    failure_ = std::move(failure);
  }

  // The artifacts read since the last call (a streamed trace's grow as it
  // is read): what a subscribe of each passes, and their keys' faults.
  void add_artifacts() {
    recorder_.add_artifacts();
    for (auto a = static_cast<std::uint32_t>(subscribe_as_.size()); a < trace_.artifacts.size();
         ++a) {
      const Artifact& artifact = trace_.artifacts[a];
      subscribe_as_.push_back(SubscribeAs{recorder_.key_ref(recorder_.key_of_artifact(a)),
                                          scheduler_.key_hash(artifact.key), artifact.size_bytes,
                                          artifact.origin, artifact.mirrors});
    }
    faults_.resize(recorder_.key_count(), KeyFaults{});
  }

  // At `at`, the records due then go in.
  void wake_for_records(double at) {
    Timer::set(at, [this] {
      if (stopped_) return;
      enter();
      on_records_due();
    });
  }

  void on_records_due() {
    const double t = now();
    if (stream_ != nullptr) {
      while (has_next_ && next_.t <= t) {
        if (trace_.artifacts.size() != subscribe_as_.size()) add_artifacts();
        apply(next_);
        ++records_applied_;
        try {
          has_next_ = stream_->next(next_);
        } catch (...) {
          stop(std::current_exception());
          return;
        }
      }
      if (has_next_) wake_for_records(next_.t);
      report_progress(t);
      return;
    }
    while (next_record_ < trace_.records.size() && trace_.records[next_record_].t <= t) {
      apply(trace_.records[next_record_++]);
      ++records_applied_;
    }
    if (next_record_ < trace_.records.size()) {
      wake_for_records(trace_.records[next_record_].t);
    }
    report_progress(t);
  }

  // The progress callback, every 4096 records at most every 0.2 s of wall
  // time (the clock is read only then).
  void report_progress(double t) {
    if (!options_.progress || records_applied_ < progress_at_ || in_rollout()) return;
    progress_at_ = records_applied_ + 4096;
    const auto wall = std::chrono::steady_clock::now();
    if (wall - progress_wall_ < std::chrono::milliseconds(200)) return;
    progress_wall_ = wall;
    options_.progress(t, records_applied_);
  }

  void apply(const Record& r) {
    const double t = now();
    switch (r.op) {
      case Op::subscribe: {
        const SubscribeAs& a = subscribe_as_[r.artifact];
        DemandOptions o;
        o.owner = r.owner;
        o.owner_generation = r.owner_generation;
        o.priority = r.priority;
        o.deadline_s = r.has_timeout() ? t + r.timeout_s : kNoDeadline;
        o.origin = a.origin;
        o.mirrors = a.mirrors;
        o.size_bytes = a.size_bytes;
        recorder_.before_subscribe(t, r);
        subscribing_key_ = recorder_.key_of_artifact(r.artifact);
        if (decisions_) decisions_->subscribed(subscribing_key_);
        const DemandHandle handle = scheduler_.subscribe(t, a.key, a.key_hash, o);
        if (stream_ != nullptr) {
          live_handles_.emplace(r.demand, handle);  // Until its Deliver (drain, below).
        } else {
          handle_of_demand_[r.demand] = handle;
        }
        timeline_.demand_started(r.owner, trace_.owners[r.owner], r.demand, t);
        break;
      }
      case Op::cancel:
        if (const auto handle = handle_of(r.demand)) {
          scheduler_.cancel(t, *handle);
        } else {
          ++stale_cancels_;
        }
        break;
      case Op::set_priority:
        if (const auto handle = handle_of(r.demand)) {
          scheduler_.set_priority(t, *handle, r.priority);
        } else {
          ++stale_priority_changes_;
        }
        break;
      case Op::end_owner:
        scheduler_.end_owner(
            t, r.owner,
            r.has_generation ? std::optional<OwnerGeneration>(r.owner_generation) : std::nullopt);
        break;
      case Op::fault:
        inject(r);
        break;
      case Op::throttle:
        if (client_background_ == nullptr) {  // A streamed trace's first throttle record.
          stop(std::make_exception_ptr(std::invalid_argument(kNoThrottleUnderNs3)));
          return;
        }
        set_throttle(trace_.throttles[r.fault]);
        break;
    }
    drain();
  }

  // A demand's handle; none when a streamed run's demand has ended (it no
  // longer knows the handle): the record is then ignored as the scheduler
  // ignores a stale handle, and counted alike.
  std::optional<DemandHandle> handle_of(std::uint32_t demand) const {
    if (stream_ == nullptr) return handle_of_demand_[demand];
    auto it = live_handles_.find(demand);
    if (it == live_handles_.end()) return std::nullopt;
    return it->second;
  }

  void inject(const Record& r) {
    const FaultSpec& fault = trace_.faults[r.fault];
    switch (fault.kind) {
      case FaultKind::transfer_error: {
        KeyFaults& f = faults_[recorder_.key_of_artifact(r.artifact)];
        f.transfer_errors += fault.count;
        f.after_fraction = fault.after_fraction;
        f.retryable = fault.retryable;
        break;
      }
      case FaultKind::corrupt:
        faults_[recorder_.key_of_artifact(r.artifact)].corrupt += fault.count;
        break;
      case FaultKind::origin_down: {
        origin_down_until_[fault.origin] =
            std::max(origin_down_until_[fault.origin], now() + fault.duration_s);
        // Running transfers from that origin fail now, with what they received.
        std::vector<std::uint64_t> victims;
        for (const auto& [id, transfer] : transfers_) {
          if (transfer.origin == fault.origin && (transfer.comm || transfer.connecting))
            victims.push_back(id);
        }
        if (tcp_) tcp_->close_all(fault.origin);
        std::sort(victims.begin(), victims.end());  // Deterministic order.
        for (std::uint64_t id : victims) {
          Transfer& transfer = transfers_.at(id);
          const std::uint64_t done = bytes_done(transfer);
          cancel_comm(id, transfer);
          end_transfer(id, TransferStatus::retryable_error, done, "origin down");
        }
        break;
      }
    }
  }

  // --- Commands --------------------------------------------------------------

  void drain() {
    for (;;) {
      scheduler_.take_commands(commands_);
      if (commands_.empty()) break;
      for (Command& command : commands_) {
        if (throttle_on_) throttle_dirty_ = throttle_.observe(command) || throttle_dirty_;
        dispatch(command, [this](auto& c) { handle(c); });
      }
    }
    if (throttle_dirty_) apply_throttle();
    recorder_.after_commands(now());
    arm_wakeup();
    while (const std::optional<SnapshotRequest> r = take_snapshot_request()) arm_snapshot(*r);
  }

  // --- The oracle's probes (sim/oracle.h) ------------------------------------

  // The oracle's scout and probes see the run's state at their horizons.
  void arm_snapshot(SnapshotRequest r) {
    Timer::set(std::max(r.at_s, now()), [this, id = r.id] {
      if (stopped_) return;
      enter();
      oracle_snapshot(id, probe_state());
    });
  }

  ProbeEnd probe_state() {
    ProbeEnd end;
    end.t = now();
    const Summary& s = recorder_.result().summary;
    end.bytes_transferred = static_cast<double>(s.bytes_transferred);
    for (const auto& [id, transfer] : transfers_)
      end.bytes_transferred += static_cast<double>(bytes_done(transfer));
    end.bytes_wasted = static_cast<double>(s.bytes_wasted);
    end.timed_out =
        static_cast<double>(s.outcomes[static_cast<std::size_t>(DemandOutcome::timed_out)]);
    end.unserved = end.timed_out +
                   static_cast<double>(s.outcomes[static_cast<std::size_t>(DemandOutcome::failed)]);
    end.pollution_s = recorder_.pollution_s_at(end.t);
    recorder_.for_each_live_demand([&](const DemandResult& d) {
      end.latencies.push_back({d.priority, end.t - d.t_subscribe});
    });
    return end;
  }

  // A transfer started, aborted or finalized by a finalize finished after
  // its time would happen at the wrong time (see Stage): never silently.
  void expect_on_time(const char* what) const {
    if (late_) {
      throw std::logic_error(std::string("a finalize finished after its time asked to ") + what +
                             " (see Stage in sim/src/simulator.cpp)");
    }
  }

  void handle(StartTransfer& c) {
    expect_on_time("start a transfer");
    recorder_.on(now(), c);
    const std::uint32_t key = recorder_.key_of_task(c.task);
    const std::uint32_t origin = c.origin;
    Transfer transfer;
    transfer.task = c.task;
    transfer.key = key;
    transfer.origin = origin;
    transfer.payload =
        c.size_bytes > c.resume_offset_bytes ? c.size_bytes - c.resume_offset_bytes : 0;
    transfer.started_s = now();
    KeyFaults& f = faults_[key];
    if (f.transfer_errors > 0) {
      --f.transfer_errors;
      transfer.fails = true;
      transfer.retryable = f.retryable;
      transfer.payload = static_cast<std::uint64_t>(
          std::floor(f.after_fraction * static_cast<double>(transfer.payload)));
    }
    recorder_.transfer_started();
    transfer.slot = timeline_.transfer_started();
    const std::uint64_t id = c.transfer.value;
    if (origin_down_until_[origin] > now()) {
      // A refused connection: fails after one round trip, nothing received.
      const double rtt = round_trip_s(origin);
      transfers_.emplace(id, std::move(transfer));
      Timer::set(now() + rtt, [this, id] {
        if (stopped_) return;
        enter();
        if (transfers_.contains(id))
          end_transfer(id, TransferStatus::retryable_error, 0, "refused");
        drain();
      });
      return;
    }
    if (tcp_) {
      // The share this transfer gets as it starts, at the rate the default
      // model moves payload (its bandwidth factor).
      const Platform& p = trace_.platform;
      const double share =
          defaults::calibrated_bandwidth_factor *
          std::min(p.origins[origin].bandwidth_Bps / (tcp_->busy(origin) + 1.0),
                   p.client_bandwidth_Bps / (tcp_->busy_total() + 1.0));
      const double path = defaults::calibrated_bandwidth_factor *
                          std::min(p.origins[origin].bandwidth_Bps, p.client_bandwidth_Bps);
      TcpConnections::Start start =
          tcp_->start(id, origin, now(), static_cast<double>(transfer.payload),
                      round_trip_s(origin), share, path);
      if (equal_shares_) start.delay_s += equal_latency_factor_ * p.origins[origin].latency_s;
      if (logging()) {
        transfer_log_ << "C " << now() << ' ' << id << ' ' << origin << ' ' << start.connection
                      << (start.new_connection ? " new " : " kept ") << start.idle_s << ' '
                      << start.window_bytes << ' ' << start.delay_s << ' '
                      << recorder_.key_name(transfer.key) << '\n';
      }
      transfer.on_connection = true;
      if (start.delay_s > 0) {
        transfer.connecting = true;
        transfers_.emplace(id, std::move(transfer));
        Timer::set(now() + start.delay_s, [this, id] {
          if (stopped_) return;
          enter();
          auto it = transfers_.find(id);
          if (it == transfers_.end() || !it->second.connecting) return;  // Aborted meanwhile.
          it->second.connecting = false;
          start_comm(id, it->second);
        });
        return;
      }
    }
    start_comm(id, transfers_.emplace(id, std::move(transfer)).first->second);
  }

  // The transfer's bytes flow from now on, at the network model's rate:
  // those after `done` (a comm moved to the other host: move_comm).
  void start_comm(std::uint64_t id, Transfer& transfer, std::uint64_t done = 0) {
    if (logging()) {
      transfer_log_ << "T " << now() << ' ' << id << ' ' << transfer.origin << ' '
                    << transfer.payload - done << '\n';
    }
    transfer.via_background = throttle_on_ && throttle_.is_background(transfer.task);
    sg4::Host* to = transfer.via_background ? client_background_ : client_;
    transfer.comm = sg4::Comm::sendto_init(origin_hosts_[transfer.origin], to);
    // bytes_done() is payload minus the comm's remaining bytes, whichever comm.
    transfer.comm->set_payload_size(transfer.payload - done);
    tag(*transfer.comm, Tag::transfer, id);
    // SimGrid bounds a comm for good by the smallest link bandwidth on its
    // route as it starts: a cap in force then would outlast its lifting. The
    // comm starts on the uncapped links; the caps are back in the same instant.
    if (throttle_on_) set_link_caps(false);
    transfer.comm->start();
    if (throttle_on_) set_link_caps(true);
    ++comms_running_;
    if (ns3_ && !heartbeat_armed_) heartbeat();
  }

  // SimGrid advances ns-3 only up to its next event of another kind, and not
  // at all when there is none: while comms run under ns-3, a timer every
  // simulated second gives it one (a comm's end still stops ns-3 at once, so
  // the times do not depend on it).
  void heartbeat() {
    heartbeat_armed_ = true;
    Timer::set(clock_ + 1.0, [this] {
      heartbeat_armed_ = false;
      clock_ = sg4::Engine::get_clock();
      if (!stopped_ && comms_running_ > 0) heartbeat();
    });
  }

  double round_trip_s(std::uint32_t origin) const {
    return 2 * (trace_.platform.origins[origin].latency_s + trace_.platform.client_latency_s);
  }

  void handle(AbortTransfer& c) {
    expect_on_time("abort a transfer");
    auto it = transfers_.find(c.transfer.value);
    if (it == transfers_.end()) return;
    Transfer& transfer = it->second;
    const std::uint64_t done = bytes_done(transfer);
    recorder_.on(now(), c);
    recorder_.attempt_aborted(c.task, done);
    cancel_comm(c.transfer.value, transfer);  // Kept alive by cancelled_ until its reports.
    // libcurl closes a connection whose response it stops reading.
    if (transfer.on_connection) tcp_->finish(c.transfer.value, transfer.origin, now(), false);
    recorder_.transfer_bytes(transfer.task, done);
    timeline_.transfer_ended(transfer.slot, artifact_name(transfer.key), transfer.started_s, now(),
                             "aborted");
    transfers_.erase(it);
  }

  void handle(StartFinalize& c) {
    expect_on_time("start a finalize");
    recorder_.on(now(), c);
    const std::uint32_t key = recorder_.key_of_task(c.task);
    Finalize f;
    f.id = c.finalize;
    f.task = c.task;
    f.size = c.size_bytes;
    f.started_s = now();
    f.lane = timeline_.finalize_started();
    KeyFaults& faults = faults_[key];
    if (faults.corrupt > 0) {
      --faults.corrupt;
      f.corrupt = true;
      if (!options_.finalize_execs) ++corrupt_on_stages_;
    }
    auto& stored = finalizes_.emplace(c.finalize.value, std::move(f)).first->second;
    enter_stage(hashing_, c.finalize.value, stored);
  }

  void handle(Deliver& c) {
    const DemandResult& d = recorder_.on(now(), c);
    if (c.outcome == DemandOutcome::succeeded && oracle_watching())
      oracle_served(d.priority, d.t_end - d.t_subscribe);
    if (stream_ != nullptr) {
      live_handles_.erase(d.demand);
      return;  // No timeline in a streamed run (and no demand ids to give it).
    }
    timeline_.demand_ended(d.owner, d.demand, trace_.demand_ids[d.demand],
                           trace_.artifacts[d.artifact].id, d.t_subscribe, d.t_end,
                           to_string(c.outcome));
  }

  void handle(EvictArtifact& c) { recorder_.on(now(), c); }
  // A kept partial is only an offset here: the next task's StartTransfer
  // sends the rest. Dropping it costs nothing but the recorder's charge.
  void handle(DropPartial& c) { recorder_.on(now(), c); }
  void handle(TaskCreated& c) { recorder_.on(now(), c); }
  void handle(DemandAttached& c) { recorder_.on(now(), c); }
  void handle(DemandPriorityChanged& c) { recorder_.on(now(), c); }

  void handle(TaskPriorityChanged& c) {
    const TaskResult& task = recorder_.on(now(), c);
    timeline_.task_priority(c.task.value, trace_.artifacts[task.artifact].id, now(), c.priority);
  }

  void handle(OrphanDecided& c) {
    recorder_.on(now(), c);
    if (decisions_) {
      const std::uint32_t key = recorder_.key_of_task(c.task);
      decisions_->decided(now(), c, key, recorder_.subscribing() && subscribing_key_ == key);
    }
  }

  void handle(TaskEnded& c) { recorder_.on(now(), c); }

  // --- Completions -----------------------------------------------------------

  // SimGrid still reads an activity after its completion callback returns, so
  // an activity is never released inside one: it is retired here and released
  // by the first retirement at a later virtual time, when SimGrid is done with
  // every step of the earlier one. (A timer at the same instant would do too,
  // but costs SimGrid a step of its own, per retirement.)
  void retire(sg4::ActivityPtr activity) {
    if (!activity) return;
    if (clock_ > graveyard_s_) {
      graveyard_.clear();
      graveyard_s_ = clock_;
    }
    graveyard_.push_back(std::move(activity));
  }

  // --- Throttling ----------------------------------------------------------------

  // A throttle record, or the header's caps at the start.
  void set_throttle(const ThrottleConfig& config) {
    if (!throttle_on_) {
      if (config == ThrottleConfig{}) return;
      throttle_on_ = true;
      for (const TaskInfo& task : scheduler_.tasks())
        throttle_.track(task.id, task.effective_priority, task.demanded_priority);
    }
    throttle_.set(config);
    apply_throttle();
  }

  // The links carry the caps that apply now, and each running comm goes to
  // the host of its class (moved when its task crossed the level).
  void apply_throttle() {
    throttle_dirty_ = false;
    set_link_caps(true);
    std::vector<std::uint64_t> moving;
    for (const auto& [id, transfer] : transfers_) {
      if (transfer.comm && transfer.via_background != throttle_.is_background(transfer.task))
        moving.push_back(id);
    }
    std::sort(moving.begin(), moving.end());  // Deterministic order.
    for (std::uint64_t id : moving)
      move_comm(id, transfers_.at(id));
  }

  // The links' bandwidths with the caps that apply now (`capped`), or without.
  void set_link_caps(bool capped) {
    const ThrottleConfig& c = throttle_.config();
    // Caps are of body bytes, links carry bytes before the model's bandwidth factor.
    const double factor = bandwidth_factor();
    background_link_->set_bandwidth(capped && throttle_.background_limited()
                                        ? c.background_Bps / factor
                                        : kUnlimitedBps);
    const double client = trace_.platform.client_bandwidth_Bps;
    client_link_->set_bandwidth(capped && c.overall_Bps > 0
                                    ? std::min(client, c.overall_Bps / factor)
                                    : client);
  }

  // A running comm continues as a new one to the other host, from the bytes
  // its attempt has.
  void move_comm(std::uint64_t id, Transfer& transfer) {
    const std::uint64_t done = bytes_done(transfer);
    cancel_comm(id, transfer);
    start_comm(id, transfer, done);
  }

  double bandwidth_factor() const {
    switch (options_network_) {
      case NetworkModel::calibrated:
      case NetworkModel::tcp:
        return defaults::calibrated_bandwidth_factor;
      case NetworkModel::lv08:
        return 0.97;  // SimGrid's LV08 default.
      default:
        return 1.0;
    }
  }

  // SimGrid reports a cancelled comm twice (CANCELED, then FAILED) and reads
  // it each time: it must stay alive until the second report.
  void cancel_comm(std::uint64_t id, Transfer& transfer) {
    if (!transfer.comm) return;
    if (logging()) transfer_log_ << "A " << now() << ' ' << id << '\n';
    sg4::Comm* raw = transfer.comm.get();
    tag(*raw, Tag::cancelled, 0);
    // SimGrid cannot cancel an ns-3 flow (its action leaves the socket running
    // and then finishes a destroyed action): the comm is left to end on its
    // own, reported once, and nothing reads it meanwhile.
    cancelled_.emplace(raw, CancelledComm{std::move(transfer.comm), 0, ns3_ ? 1 : 2});
    transfer.comm = nullptr;
    if (ns3_) return;
    --comms_running_;
    raw->cancel();
  }

  // Each activity carries (kind, id) in its user data, so a completion finds
  // its transfer or finalize without a lookup by address.
  enum class Tag : std::uintptr_t { none = 0, transfer = 1, finalize = 2, cancelled = 3 };
  static_assert(sizeof(std::uintptr_t) >= sizeof(std::uint64_t), "ids are tagged in a pointer");
  static void tag(sg4::Activity& activity, Tag kind, std::uint64_t id) {
    // An id keeps its top two bits free until 2^30 operations (the engine
    // counts them in its top 32 bits): far beyond any trace, but never silent.
    if (id >> 62 != 0) throw std::overflow_error("more than 2^30 transfers and finalizes");
    activity.set_data(reinterpret_cast<void*>((static_cast<std::uintptr_t>(id) << 2) |
                                              static_cast<std::uintptr_t>(kind)));
  }

  void on_completion(const sg4::Activity& activity) {
    const auto data = reinterpret_cast<std::uintptr_t>(activity.get_data<void>());
    const auto kind = static_cast<Tag>(data & 3);
    const std::uint64_t id = data >> 2;
    if (kind == Tag::cancelled) {
      auto it = cancelled_.find(&activity);
      if (it != cancelled_.end() && ++it->second.reports >= it->second.last_report) {
        if (ns3_) --comms_running_;
        retire(std::move(it->second.comm));
        cancelled_.erase(it);
      }
      return;
    }
    if (kind == Tag::transfer) {
      if (activity.get_state() != sg4::Activity::State::FINISHED) return;
      Transfer& transfer = transfers_.at(id);
      const TransferStatus status = !transfer.fails      ? TransferStatus::ok
                                    : transfer.retryable ? TransferStatus::retryable_error
                                                         : TransferStatus::permanent_error;
      end_transfer(id, status, transfer.payload, transfer.fails ? "error" : "ok");
      drain();
      return;
    }
    if (kind == Tag::finalize) {
      if (activity.get_state() != sg4::Activity::State::FINISHED) return;
      exec_done(id);
    }
  }

  // --- Finalize stages (see Stage) -------------------------------------------

  void enter_stage(Stage& stage, std::uint64_t id, Finalize& f) {
    const auto bytes = static_cast<double>(f.size);
    if (options_.finalize_execs) {
      start_exec(stage, id, f, bytes);
      return;
    }
    advance(stage);
    stage.jobs.push(Stage::Job{stage.served + bytes, id});
    arm_wake();
  }

  // Brings the stage's `served` up to now().
  void advance(Stage& stage) {
    if (!stage.jobs.empty()) {
      stage.served +=
          (now() - stage.served_at) * stage.speed / static_cast<double>(stage.jobs.size());
    }
    stage.served_at = now();
  }

  // When the stage's first finish tag is reached, if nothing enters before.
  static double next_leave(const Stage& stage) {
    const double at = stage.served_at + (stage.jobs.top().tag - stage.served) *
                                            static_cast<double>(stage.jobs.size()) / stage.speed;
    return std::max(at, stage.served_at);
  }

  // The stage that a finalize leaves next, and when; null if both are idle.
  Stage* next_leaving(double& at) {
    Stage* next = nullptr;
    for (Stage* stage : {&writing_, &hashing_}) {  // The disk first, at the same instant.
      if (stage->jobs.empty()) continue;
      const double t = next_leave(*stage);
      if (next == nullptr || t < at) {
        next = stage;
        at = t;
      }
    }
    return next;
  }

  // Finishes, in time order and each at its own time, the finalizes that
  // leave a stage by `until` (see Stage). `clock_` is SimGrid's time.
  void catch_up(double until) {
    double at = 0;
    while (Stage* stage = next_leaving(at)) {
      if (at > until) break;
      now_ = at;
      late_ = at != clock_;
      leave(*stage);
    }
    late_ = false;
  }

  // The stage's first finalize leaves (with any whose tag is the same, to
  // rounding: identical finalizes that came together).
  void leave(Stage& stage) {
    advance(stage);
    leaving_.clear();
    leaving_.push_back(stage.jobs.top().id);
    stage.jobs.pop();
    const double tie = stage.served + 1e-9 * std::max(1.0, stage.served);
    while (!stage.jobs.empty() && stage.jobs.top().tag <= tie) {
      leaving_.push_back(stage.jobs.top().id);
      stage.jobs.pop();
    }
    if (stage.jobs.empty()) stage.served = 0;
    // Finishing one may make others enter a stage, never leave one (only
    // catch_up calls leave), so leaving_ stays as it is meanwhile.
    for (std::uint64_t id : leaving_)
      stage_done(id);
    arm_wake();
  }

  // While a corrupt body is on a stage, a SimGrid timer at each leaving, so
  // that its failed verification (and a retry it may start) happens at its
  // time (see Stage).
  void arm_wake() {
    double at = 0;
    // Throttling: a finalize that ends can lift a cap, which changes the links now.
    Stage* next = corrupt_on_stages_ > 0 || throttle_on_ ? next_leaving(at) : nullptr;
    if (next != nullptr && wake_ != nullptr && wake_at_ == at) return;
    if (wake_ != nullptr) {
      wake_->remove();
      wake_ = nullptr;
    }
    if (next == nullptr) return;
    wake_at_ = std::max(at, clock_);
    wake_ = Timer::set(wake_at_, [this] {
      wake_ = nullptr;  // SimGrid frees it.
      if (stopped_) return;
      enter();          // Catches up: the leaving happens there.
      arm_wake();
    });
  }

  void start_exec(const Stage& stage, std::uint64_t id, Finalize& f, double bytes) {
    f.exec = sg4::Exec::init();
    f.exec->set_flops_amount(bytes)->set_host(stage.host);
    tag(*f.exec, Tag::finalize, id);
    f.exec->start();
  }

  // An Exec of a stage finished (finalize_execs).
  void exec_done(std::uint64_t id) {
    retire(std::move(finalizes_.at(id).exec));
    stage_done(id);
  }

  // Finalize `id` has left its stage.
  void stage_done(std::uint64_t id) {
    Finalize& f = finalizes_.at(id);
    if (f.hashing) {
      // Hashing done; now the disk write of the verified bytes.
      f.hashing = false;
      enter_stage(writing_, id, f);
      return;
    }
    const FinalizeStatus status =
        f.corrupt ? FinalizeStatus::verify_failed : FinalizeStatus::installed;
    if (f.corrupt) {
      recorder_.wasted(f.size);
      if (!options_.finalize_execs) --corrupt_on_stages_;
    }
    timeline_.finalize_ended(f.lane, "verify+install", f.started_s, now(), to_string(status));
    const FinalizeId finalize = f.id;
    finalizes_.erase(id);
    scheduler_.on_finalize_finished(now(), finalize, status);
    drain();
  }

  void end_transfer(std::uint64_t id, TransferStatus status, std::uint64_t bytes, const char* how) {
    Transfer& transfer = transfers_.at(id);
    if (transfer.comm) --comms_running_;
    retire(std::move(transfer.comm));
    // A complete response leaves its connection for the next transfer.
    if (transfer.on_connection)
      tcp_->finish(id, transfer.origin, now(), status == TransferStatus::ok && !transfer.fails);
    recorder_.transfer_bytes(transfer.task, bytes);
    timeline_.transfer_ended(transfer.slot, artifact_name(transfer.key), transfer.started_s, now(),
                             how);
    transfers_.erase(id);
    scheduler_.on_transfer_finished(now(), TransferId{id}, status, bytes);
  }

  std::uint64_t bytes_done(const Transfer& transfer) const {
    if (!transfer.comm) return 0;
    const double remaining = transfer.comm->get_remaining();
    const double done = static_cast<double>(transfer.payload) - remaining;
    return done <= 0 ? 0 : static_cast<std::uint64_t>(std::floor(done));
  }

  const std::string& artifact_name(std::uint32_t key) const { return recorder_.key_name(key); }

  // --- Wake-ups and pollution -------------------------------------------------

  void arm_wakeup() {
    const auto next = scheduler_.next_wakeup_s();
    if (!next) return;
    const double at = std::max(*next, clock_);
    if (!armed_.empty() && *armed_.begin() <= at) return;  // An earlier timer will re-arm.
    armed_.insert(at);
    Timer::set(at, [this, at] {
      if (stopped_) return;
      enter();
      armed_.erase(armed_.find(at));
      scheduler_.on_timer(now());
      drain();
    });
  }

  Result finish() {
    if (oracle_watching()) oracle_run_ended(probe_state());  // Ends a probe.
    recorder_.ignored(scheduler_.stats().stale_cancels_ignored + stale_cancels_,
                      scheduler_.stats().stale_priority_changes_ignored + stale_priority_changes_);
    for (std::string& w : setting_warnings(trace_, options_))
      recorder_.warn(std::move(w));
    Result result = recorder_.finish(now());
    if (in_rollout()) finish_rollout(result);  // Ends this child of the oracle.
    if (const auto* oracle = dynamic_cast<const HindsightOracle*>(policy_.get())) {
      report_oracle(*oracle, result);
    }
    if (!options_.timeline_path.empty()) timeline_.write(options_.timeline_path, trace_);
    if (decisions_) decisions_->write(options_.decisions_path, result, trace_);
    return result;
  }

  // The oracle's account of its search, and a warning should its own run
  // not score what its best child did (the children would then not have
  // reproduced it: nothing here may depend on anything but the trace).
  void report_oracle(const HindsightOracle& oracle, Result& result) const {
    const HindsightOracle::Stats& s = oracle.stats();
    nlohmann::json report = {{"decisions", s.decisions}, {"runs", s.runs},
                             {"probes", s.probes},       {"probed", s.probed},
                             {"suggested", s.suggested},
                             {"verified", s.verified},   {"changed", s.changed},
                             {"base", s.base}};
    if (s.decisions > 0) report["base_score"] = s.base_score;
    if (s.decisions > 0) {
      const double score = score_result(result, oracle.weights()).score;
      report["score"] = score;
      if (score != s.score) {
        char text[200];
        std::snprintf(text, sizeof text,
                      "oracle: its run scored %.17g, its best child %.17g (not reproduced)", score,
                      s.score);
        result.warnings.emplace_back(text);
      }
    }
    result.policy_report_json = report.dump();
  }

  const Trace& trace_;
  TraceStream* stream_ = nullptr;  // A streamed run reads its records here.
  Record next_;                    // Its next record,
  bool has_next_ = false;          // if any.
  // Its live demands' handles (a demand leaves at its terminal), and the
  // cancels and set_priority records that came after their demand's end.
  absl::flat_hash_map<std::uint32_t, DemandHandle> live_handles_;
  std::uint64_t stale_cancels_ = 0;
  std::uint64_t stale_priority_changes_ = 0;
  bool stopped_ = false;         // See stop().
  std::exception_ptr failure_;
  SimOptions options_;
  // The virtual time of what is being handled: SimGrid's clock in a callback
  // (enter), or the earlier time of a finalize that catch_up() finishes late.
  double now_ = 0;
  double clock_ = 0;   // SimGrid's clock as of the callback running (enter).
  bool late_ = false;  // now_ is before clock_ (catch_up).
  ResultRecorder recorder_;
  std::shared_ptr<OrphanPolicy> policy_;
  std::unique_ptr<DecisionLog> decisions_;  // With --decisions.
  std::uint32_t subscribing_key_ = 0;       // The key of the subscribe going in.
  Scheduler scheduler_;
  std::unique_ptr<sg4::Engine> engine_;
  sg4::Host* client_ = nullptr;
  sg4::Link* client_link_ = nullptr;
  static constexpr double kUnlimitedBps = 1e15;
  static constexpr const char* kNoThrottleUnderNs3 =
      "throttling is not modelled under the ns3 network model (its links cannot change during a "
      "run): use another --network-model";
  sg4::Host* client_background_ = nullptr;  // Throttling; none under ns-3.
  sg4::Link* background_link_ = nullptr;
  ThrottleRule throttle_;
  bool throttle_on_ = false;     // Some cap was set: the rule follows the engine.
  bool throttle_dirty_ = false;  // A command may have changed what it answers.
  NetworkModel options_network_ = NetworkModel::calibrated;
  sg4::Host* disk_ = nullptr;
  std::vector<sg4::Host*> origin_hosts_;
  std::vector<double> origin_down_until_;
  std::unique_ptr<TcpConnections> tcp_;  // The tcp network model's connection pools.
  bool ns3_ = false;                     // The ns3 network model (heartbeat()).
  // TcpSharing::equal, and the latency factor SimGrid would apply.
  bool equal_shares_ = false;
  double equal_latency_factor_ = 1;
  bool heartbeat_armed_ = false;
  std::uint64_t comms_running_ = 0;

  std::vector<KeyFaults> faults_;  // By key index.

  std::size_t next_record_ = 0;
  std::uint64_t records_applied_ = 0;  // For options_.progress.
  std::uint64_t progress_at_ = 0;
  std::chrono::steady_clock::time_point progress_wall_{};
  std::vector<DemandHandle> handle_of_demand_;
  // By artifact, what a subscribe of it passes, in one place: the key's
  // KeyRef (one per key, aliases share it) and the scheduler's hash of it,
  // computed once rather than per subscribe.
  struct SubscribeAs {
    KeyRef key;
    std::size_t key_hash = 0;
    std::uint64_t size_bytes = 0;
    OriginId origin = 0;
    std::vector<OriginId> mirrors;
  };
  std::vector<SubscribeAs> subscribe_as_;

  // Open addressing: no node to allocate and free per transfer, finalize or
  // cancelled comm (hundreds of thousands of each in a large trace).
  absl::flat_hash_map<std::uint64_t, Transfer> transfers_;
  struct CancelledComm {
    sg4::CommPtr comm;
    int reports = 0;
    int last_report = 2;  // CANCELED then FAILED; an ns-3 comm left to end: FINISHED.
  };
  absl::flat_hash_map<const sg4::Activity*, CancelledComm> cancelled_;
  std::vector<sg4::ActivityPtr> graveyard_;
  double graveyard_s_ = 0;  // When graveyard_'s activities were retired.
  absl::flat_hash_map<std::uint64_t, Finalize> finalizes_;
  Stage hashing_, writing_;
  std::vector<std::uint64_t> leaving_;  // Finalizes leaving a stage (leave).
  std::size_t corrupt_on_stages_ = 0;   // Corrupt bodies on a stage (arm_wake),
  Timer* wake_ = nullptr;               // the timer that wakes the simulation for them,
  double wake_at_ = 0;                  // and when.
  std::multiset<double> armed_;
  std::vector<Command> commands_;

  std::ofstream transfer_log_;
  // A child of the oracle writes no file: its parent owns the outputs.
  bool logging() const { return transfer_log_.is_open() && !in_rollout(); }
  Timeline timeline_;
};

}  // namespace

std::vector<std::string> setting_warnings(const Trace& trace, const SimOptions& options) {
  std::vector<std::string> out;
  const std::uint32_t max_transfers =
      options.max_transfers.value_or(trace.scheduler.max_transfers);
  const std::uint32_t per_origin = options.max_per_origin.value_or(trace.scheduler.max_per_origin);
  std::vector<bool> used(std::max<std::size_t>(trace.platform.origins.size(), 1), false);
  std::size_t origins = 0;
  for (const Artifact& a : trace.artifacts) {
    if (a.origin >= used.size()) used.resize(a.origin + 1, false);
    if (!used[a.origin]) {
      used[a.origin] = true;
      ++origins;
    }
  }
  const std::uint64_t reachable = std::uint64_t{per_origin} * origins;
  if (origins > 0 && max_transfers > reachable) {
    out.push_back("max_transfers " + std::to_string(max_transfers) +
                  " cannot be reached: at most max_per_origin " + std::to_string(per_origin) +
                  " x " + std::to_string(origins) + " origin" + (origins == 1 ? "" : "s") +
                  " = " + std::to_string(reachable) + " transfers run at once");
  }
  return out;
}

Result simulate_streamed(TraceStream& stream, const SimOptions& options, RowSink& rows) {
  if (!options.timeline_path.empty()) throw std::invalid_argument("a streamed run writes no timeline");
  if (!options.decisions_path.empty())
    throw std::invalid_argument("a streamed run writes no decision log");
  if (options.policy_object == nullptr && !streamable_policy(options.policy)) {
    throw std::invalid_argument("policy " + options.policy +
                                " reads the whole trace in advance: it cannot run streamed");
  }
  Simulation simulation(stream.trace(), options, &stream, &rows);
  return simulation.run();
}

Result simulate(const Trace& trace, const SimOptions& options) {
  if (!options.timeline_path.empty()) {
    // Fail before running, not after an hour of simulation.
    std::ofstream probe(options.timeline_path);
    if (!probe) throw std::runtime_error("cannot write " + options.timeline_path);
  }
  if (!options.decisions_path.empty()) {
    std::ofstream probe(options.decisions_path);
    if (!probe) throw std::runtime_error("cannot write " + options.decisions_path);
  }
  if (!(options.decision_horizon_s > 0) || !std::isfinite(options.decision_horizon_s)) {
    throw std::invalid_argument("decision horizon must be a positive number of seconds");
  }
  Simulation simulation(trace, options);
  return simulation.run();
}

}  // namespace dfl::sim
