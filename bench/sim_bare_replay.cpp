// The baseline for the simulator's overhead: a bare SimGrid replay of the
// same transfers (same sizes, start times and origins, hence the same
// concurrency) on the same platform, with no engine, no trace records, no
// finalize and no results.
//
// Usage: sim_bare_replay TRACE TRANSFER_LOG [--finalize] [--network-model cm02]
// TRACE supplies only its header (the platform); TRANSFER_LOG is what
// `demandflight sim --transfer-log` wrote: "T t origin bytes" per transfer
// started and "F t bytes" per finalize started. With --finalize the replay
// also runs each finalize as the simulator models it (hashing on the client's
// CPU, then a write on its disk), so that both run the same SimGrid
// activities. Prints what it replayed and the wall time of the replay itself
// (after loading its input), comparable to `demandflight sim --profile`.
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "demandflight/sim/defaults.h"
#include "demandflight/sim/trace.h"

namespace sg4 = simgrid::s4u;

namespace {

struct Start {
  double t;
  bool finalize;
  std::uint32_t origin;
  std::uint64_t bytes;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TRACE TRANSFER_LOG [--finalize] [--network-model cm02]\n",
                 argv[0]);
    return 2;
  }
  bool cm02 = false, with_finalize = false;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--finalize") == 0) with_finalize = true;
    if (std::strcmp(argv[i], "cm02") == 0) cm02 = true;
  }
  std::ifstream trace_file(argv[1]);
  std::string header_line;
  std::getline(trace_file, header_line);
  std::istringstream header(header_line + "\n");
  const dfl::sim::Trace trace = dfl::sim::read_trace(header, argv[1]);

  std::vector<Start> starts;
  {
    std::ifstream log(argv[2]);
    std::string kind;
    while (log >> kind) {
      Start s{};
      if (kind == "T") {
        log >> s.t >> s.origin >> s.bytes;
      } else {
        s.finalize = true;
        log >> s.t >> s.bytes;
      }
      if (!log) break;
      if (!s.finalize || with_finalize) starts.push_back(s);
    }
  }

  int sg_argc = 2;
  char arg0[] = "sim_bare_replay";
  char arg1[] = "--log=root.thresh:critical";
  char* sg_argv[] = {arg0, arg1, nullptr};
  sg4::Engine engine(&sg_argc, sg_argv);
  // The same network model as the simulator's (sim/src/simulation.cpp).
  const auto model = cm02 ? dfl::sim::NetworkModel::cm02 : trace.platform.network_model;
  if (model != dfl::sim::NetworkModel::lv08) {
    engine.set_config("network/model:CM02");
    engine.set_config("network/crosstraffic:0");
  }
  if (model == dfl::sim::NetworkModel::calibrated) {
    engine.set_config("network/latency-factor:" +
                      std::to_string(dfl::sim::defaults::calibrated_latency_factor));
    engine.set_config("network/bandwidth-factor:" +
                      std::to_string(dfl::sim::defaults::calibrated_bandwidth_factor));
  }
  // The platform, as in the simulator. Origins named only by artifacts (not in
  // the header) get the defaults, in the order the simulator would add them.
  auto* zone = sg4::create_full_zone("world");
  auto* client = zone->create_host("client", trace.platform.hash_Bps);
  auto* disk = zone->create_host("client-disk", trace.platform.disk_write_Bps);
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

  // Activities are released by a timer, never inside their own completion
  // callback (SimGrid still reads them afterwards), as in the simulator.
  std::unordered_map<const sg4::Activity*, sg4::ActivityPtr> running;
  std::unordered_map<const sg4::Activity*, std::uint64_t> hashing;  // -> bytes to write
  std::vector<sg4::ActivityPtr> graveyard;
  std::size_t done = 0;
  auto retire = [&](sg4::ActivityPtr a) {
    if (graveyard.empty())
      simgrid::kernel::timer::Timer::set(sg4::Engine::get_clock(), [&] { graveyard.clear(); });
    graveyard.push_back(std::move(a));
  };
  sg4::Activity::on_completion_cb([&](const sg4::Activity& a) {
    auto it = running.find(&a);
    if (it == running.end()) return;
    retire(std::move(it->second));
    running.erase(it);
    if (auto h = hashing.find(&a); h != hashing.end()) {
      auto write = sg4::Exec::init();
      write->set_flops_amount(static_cast<double>(h->second))->set_host(disk);
      hashing.erase(h);
      running.emplace(write.get(), write);
      write->start();
      return;
    }
    ++done;
  });
  std::size_t next = 0;
  std::function<void()> start_due = [&] {
    const double now = sg4::Engine::get_clock();
    while (next < starts.size() && starts[next].t <= now) {
      const Start& s = starts[next++];
      if (s.finalize) {
        auto hash = sg4::Exec::init();
        hash->set_flops_amount(static_cast<double>(s.bytes))->set_host(client);
        hashing.emplace(hash.get(), s.bytes);
        running.emplace(hash.get(), hash);
        hash->start();
        continue;
      }
      if (s.origin >= origins.size()) continue;
      auto comm = sg4::Comm::sendto_init(origins[s.origin], client);
      comm->set_payload_size(s.bytes);
      running.emplace(comm.get(), comm);
      comm->start();
    }
    if (next < starts.size()) simgrid::kernel::timer::Timer::set(starts[next].t, start_due);
  };
  if (!starts.empty()) simgrid::kernel::timer::Timer::set(starts.front().t, start_due);
  const auto wall_start = std::chrono::steady_clock::now();
  engine.run();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::printf(
      "%zu activities replayed (%s), %zu completed, virtual end %.3f s, replay wall %.3f s\n",
      starts.size(), with_finalize ? "transfers + finalizes" : "transfers", done,
      sg4::Engine::get_clock(), wall_s);
  return 0;
}
