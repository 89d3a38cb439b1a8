// The baseline for the simulator's overhead: a bare SimGrid replay of the
// same transfers (same sizes, start times, origins and cancellations, hence
// the same concurrency) on the same platform, with no engine, no finalize, no
// trace records and no results.
//
// Usage: sim_bare_replay TRACE TRANSFER_LOG [cm02]
// TRACE supplies only its header (the platform); TRANSFER_LOG is what
// `demandflight sim --transfer-log` wrote: "T t id origin bytes" per comm
// started, "A t id" per comm cancelled (an abort, an origin going down); the
// tcp model's "C ..." lines (each transfer's connection) are skipped.
// Prints what it replayed and the wall time of the replay itself: from making
// the SimGrid engine and its platform to tearing them down, after loading
// the input. That is the scope of `demandflight sim --profile`'s simulate
// (after reading the trace, before writing the result), so the two compare.
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "demandflight/format/trace.h"
#include "demandflight/sim/simulator.h"

namespace sg4 = simgrid::s4u;

namespace {

struct Event {
  double t;
  bool cancel;
  std::uint64_t id;
  std::uint32_t origin;
  std::uint64_t bytes;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TRACE TRANSFER_LOG [cm02]\n", argv[0]);
    return 2;
  }
  const bool cm02 = argc > 3 && std::strcmp(argv[3], "cm02") == 0;
  std::ifstream trace_file(argv[1]);
  std::string header_line;
  std::getline(trace_file, header_line);
  std::istringstream header(header_line + "\n");
  const dfl::format::Trace trace = dfl::format::read_trace(header, argv[1]);

  std::vector<Event> events;  // In the simulator's order.
  {
    std::ifstream log(argv[2]);
    std::string kind;
    while (log >> kind) {
      if (kind == "C") {  // A connection's state (the tcp model): no comm.
        log.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
        continue;
      }
      if (kind != "T" && kind != "A") {
        std::fprintf(stderr, "%s: unknown line kind '%s' (expected T or A)\n", argv[2],
                     kind.c_str());
        return 2;
      }
      Event e{};
      e.cancel = kind == "A";
      log >> e.t >> e.id;
      if (!e.cancel) log >> e.origin >> e.bytes;
      if (!log) break;
      events.push_back(e);
    }
  }

  const auto wall_start = std::chrono::steady_clock::now();
  std::size_t completed = 0, cancels = 0;
  double virtual_end = 0;
  {
    int sg_argc = 2;
    char arg0[] = "sim_bare_replay";
    char arg1[] = "--log=root.thresh:critical";
    char* sg_argv[] = {arg0, arg1, nullptr};
    sg4::Engine engine(&sg_argc, sg_argv);
    // The same network model as the simulator's.
    for (const std::string& setting : dfl::sim::simgrid_settings(
             cm02 ? dfl::format::NetworkModel::cm02 : trace.platform.network_model))
      engine.set_config(setting);
    // The platform, as in the simulator. Origins named only by artifacts (not in
    // the header) get the defaults, in the order the simulator would add them.
    auto* zone = sg4::create_full_zone("world");
    auto* client = zone->create_host("client", trace.platform.hash_Bps);
    zone->create_host("client-disk", trace.platform.disk_write_Bps);  // As in the simulator.
    auto* client_link = zone->create_link("client-link", trace.platform.client_bandwidth_Bps);
    client_link->set_latency(trace.platform.client_latency_s)->seal();
    std::vector<sg4::Host*> origins;
    for (const auto& origin : trace.platform.origins) {
      auto* host = zone->create_host("origin-" + origin.name, 1e9);
      auto* link = zone->create_link("link-" + origin.name, origin.bandwidth_Bps);
      link->set_latency(origin.latency_s)->seal();
      zone->add_route(host->get_netpoint(), client->get_netpoint(), nullptr, nullptr,
                      {sg4::LinkInRoute(link), sg4::LinkInRoute(client_link)}, true);
      origins.push_back(host);
    }
    zone->seal();

    // Activities are released at a later virtual time, never inside their own
    // completion callback (SimGrid still reads them afterwards), as in the
    // simulator; a cancelled comm reports twice and must live until the second.
    std::unordered_map<std::uint64_t, sg4::CommPtr> running;  // By transfer id.
    std::unordered_map<const sg4::Activity*, std::pair<sg4::CommPtr, int>> cancelled;
    std::vector<sg4::ActivityPtr> graveyard;
    double graveyard_s = 0;
    auto retire = [&](sg4::ActivityPtr a) {
      if (sg4::Engine::get_clock() > graveyard_s) {
        graveyard.clear();
        graveyard_s = sg4::Engine::get_clock();
      }
      graveyard.push_back(std::move(a));
    };
    sg4::Activity::on_completion_cb([&](const sg4::Activity& a) {
      const auto id = reinterpret_cast<std::uintptr_t>(a.get_data<void>());
      if (auto c = cancelled.find(&a); c != cancelled.end()) {
        if (++c->second.second >= 2) {
          retire(std::move(c->second.first));
          cancelled.erase(c);
        }
        return;
      }
      if (a.get_state() != sg4::Activity::State::FINISHED) return;
      auto it = running.find(id);
      if (it == running.end()) return;
      retire(std::move(it->second));
      running.erase(it);
      ++completed;
    });
    std::size_t next = 0;
    std::function<void()> due = [&] {
      const double now = sg4::Engine::get_clock();
      while (next < events.size() && events[next].t <= now) {
        const Event& e = events[next++];
        if (e.cancel) {
          auto it = running.find(e.id);
          if (it == running.end()) continue;  // Already complete here: no ordering is exact.
          sg4::Comm* raw = it->second.get();
          cancelled.emplace(raw, std::make_pair(std::move(it->second), 0));
          running.erase(it);
          raw->cancel();
          ++cancels;
          continue;
        }
        if (e.origin >= origins.size()) continue;
        auto comm = sg4::Comm::sendto_init(origins[e.origin], client);
        comm->set_payload_size(e.bytes);
        comm->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(e.id)));
        comm->start();
        running.emplace(e.id, std::move(comm));
      }
      if (next < events.size()) simgrid::kernel::timer::Timer::set(events[next].t, due);
    };
    if (!events.empty()) simgrid::kernel::timer::Timer::set(events.front().t, due);
    engine.run();
    virtual_end = sg4::Engine::get_clock();
  }  // The engine, its platform and activities go: the simulator's do too.
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::printf(
      "%zu events replayed, %zu comms completed, %zu cancelled, virtual end %.3f s, "
      "replay wall %.3f s\n",
      events.size(), completed, cancels, virtual_end, wall_s);
  return 0;
}
