// Timeline: a Chrome/Perfetto trace-event JSON file of one simulation.
//
// Layout (JSON Object Format, timestamps in whole microseconds of virtual
// time: Perfetto rounds ts and dur separately to nanoseconds, so fractional
// values can make a slice overlap the next one on its lane by 1 ns, and it
// drops such slices; whole microseconds never reverse order):
// - process 1 "transfer slots": one thread per transfer slot, a complete ("X")
//   slice per transfer attempt (name: the artifact; args: how it ended), and
//   "finalize" threads for verify + install;
// - one process per owner ("owner NAME"): a slice per demand from subscribe to
//   its terminal (args: outcome), on lanes named "lane N";
// - process 2 "task priority": a counter ("C") per task, its effective
//   priority over time; the orphan level is drawn as -1.
// Slices on one thread must nest, so overlapping slices go to separate lanes
// (threads) of the same process, always the lowest free one. Anything that
// lasts less than a microsecond (a cache hit, a refusal, a transfer aborted as
// it starts) is a process-scoped instant ("i") instead of a slice.
//
// Disabled (the default), every call returns at once.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "demandflight/format/trace.h"

namespace dfl::sim {

class Timeline {
 public:
  void enable() { enabled_ = true; }

  int transfer_started() { return enabled_ ? slots_.acquire() : -1; }
  void transfer_ended(int lane, const std::string& artifact, double start_s, double end_s,
                      std::string_view how) {
    if (!enabled_) return;
    slice(kSlotsPid, lane + 1, artifact, "transfer", start_s, end_s, how);
    slots_.release(lane);
  }

  int finalize_started() { return enabled_ ? finalizes_.acquire() : -1; }
  void finalize_ended(int lane, const std::string& name, double start_s, double end_s,
                      std::string_view how) {
    if (!enabled_) return;
    slice(kSlotsPid, kFinalizeTid + lane, name, "finalize", start_s, end_s, how);
    finalizes_.release(lane);
  }

  void demand_started(std::uint32_t owner, const std::string& owner_name, std::uint32_t demand,
                      double) {
    if (!enabled_) return;
    owner_names_.emplace(owner, owner_name);
    demand_lane_[demand] = owner_lanes_[owner].acquire();
  }
  void demand_ended(std::uint32_t owner, std::uint32_t demand, const std::string& demand_name,
                    const std::string& artifact, double start_s, double end_s,
                    std::string_view outcome) {
    if (!enabled_) return;
    auto it = demand_lane_.find(demand);
    const int lane = it->second;
    demand_lane_.erase(it);
    slice(kOwnerPidBase + static_cast<int>(owner), lane + 1, demand_name + " " + artifact, "demand",
          start_s, end_s, outcome);
    owner_lanes_[owner].release(lane);
  }

  void task_priority(std::uint64_t task, const std::string& artifact, double at_s,
                     std::optional<std::int32_t> priority) {
    if (!enabled_) return;
    events_.push_back({{"name", "priority " + artifact + " #" + std::to_string(task)},
                       {"ph", "C"},
                       {"ts", micros(at_s)},
                       {"pid", kPriorityPid},
                       {"args", {{"priority", priority ? *priority : -1}}}});
  }

  void write(const std::string& path, const format::Trace& trace) {
    if (!enabled_) return;
    nlohmann::ordered_json metadata = nlohmann::ordered_json::array();
    auto name = [&](const char* kind, int pid, int tid, const std::string& value) {
      nlohmann::ordered_json m{{"name", kind}, {"ph", "M"}, {"pid", pid}};
      if (tid >= 0) m["tid"] = tid;
      m["args"] = {{"name", value}};
      metadata.push_back(std::move(m));
    };
    name("process_name", kSlotsPid, -1, "transfer slots");
    for (int lane = 0; lane < slots_.high_water(); ++lane) {
      name("thread_name", kSlotsPid, lane + 1, "slot " + std::to_string(lane));
    }
    for (int lane = 0; lane < finalizes_.high_water(); ++lane) {
      name("thread_name", kSlotsPid, kFinalizeTid + lane, "finalize " + std::to_string(lane));
    }
    name("process_name", kPriorityPid, -1, "task priority");
    for (const auto& [owner, owner_name] : owner_names_) {
      const int pid = kOwnerPidBase + static_cast<int>(owner);
      name("process_name", pid, -1, "owner " + owner_name);
      for (int lane = 0; lane < owner_lanes_[owner].high_water(); ++lane) {
        name("thread_name", pid, lane + 1, "lane " + std::to_string(lane));
      }
    }
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    // No displayTimeUnit: current Perfetto ignores it, older importers scaled
    // every timestamp by it.
    out << "{\"otherData\": {\"trace\": " << nlohmann::json(trace.name).dump()
        << "},\n\"traceEvents\": [\n";
    bool first = true;
    for (const auto* list : {&metadata, &events_}) {
      for (const auto& event : *list) {
        out << (first ? "" : ",\n") << event.dump();
        first = false;
      }
    }
    out << "\n]}\n";
  }

 private:
  static constexpr int kSlotsPid = 1;
  static constexpr int kPriorityPid = 2;
  static constexpr int kOwnerPidBase = 100;
  static constexpr int kFinalizeTid = 10000;

  // The lowest free lane, so that overlapping slices never share a thread.
  class Lanes {
   public:
    int acquire() {
      for (std::size_t i = 0; i < busy_.size(); ++i) {
        if (!busy_[i]) {
          busy_[i] = true;
          return static_cast<int>(i);
        }
      }
      busy_.push_back(true);
      return static_cast<int>(busy_.size() - 1);
    }
    void release(int lane) { busy_[static_cast<std::size_t>(lane)] = false; }
    int high_water() const { return static_cast<int>(busy_.size()); }

   private:
    std::vector<bool> busy_;
  };

  static std::int64_t micros(double t_s) { return std::llround(t_s * 1e6); }

  // A slice on (pid, tid); an interval shorter than a microsecond becomes a
  // process-scoped instant instead, because Perfetto nests zero-length slices
  // under whatever else starts in that microsecond.
  void slice(int pid, int tid, const std::string& name, const char* category, double start_s,
             double end_s, std::string_view how) {
    const std::int64_t start_us = micros(start_s);
    const std::int64_t dur_us = micros(end_s) - start_us;
    nlohmann::ordered_json event{{"name", name}, {"cat", category}};
    if (dur_us > 0) {
      event["ph"] = "X";
      event["ts"] = start_us;
      event["dur"] = dur_us;
      event["pid"] = pid;
      event["tid"] = tid;
    } else {
      event["ph"] = "i";
      event["s"] = "p";
      event["ts"] = start_us;
      event["pid"] = pid;
    }
    event["args"] = {{"end", std::string(how)}};
    events_.push_back(std::move(event));
  }

  bool enabled_ = false;
  Lanes slots_;
  Lanes finalizes_;
  std::map<std::uint32_t, Lanes> owner_lanes_;
  std::map<std::uint32_t, std::string> owner_names_;
  std::unordered_map<std::uint32_t, int> demand_lane_;
  nlohmann::ordered_json events_ = nlohmann::ordered_json::array();
};

}  // namespace dfl::sim
