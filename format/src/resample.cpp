#include "demandflight/format/resample.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace dfl::format {
namespace {

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias.
std::uint32_t below(std::uint64_t& state, std::uint32_t n) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  for (;;) {
    const std::uint64_t x = splitmix(state);
    if (x < limit) return static_cast<std::uint32_t>(x % n);
  }
}

constexpr std::uint32_t kNone = 0xffffffff;

}  // namespace

Resample parse_resample(std::string_view name) {
  if (name == "none") return Resample::none;
  if (name == "owners") return Resample::owners;
  throw std::invalid_argument("resample: unknown resampling \"" + std::string(name) +
                              "\" (known: none, owners)");
}

Trace resample(Trace in, Resample how, std::uint64_t seed) {
  if (how == Resample::none || in.owners.empty()) return in;
  // The records and names are rebuilt; the rest of the trace stays as it is.
  const std::vector<Record> records = std::move(in.records);
  const std::vector<std::string> demand_ids = std::move(in.demand_ids);
  const std::vector<std::string> owners = std::move(in.owners);
  Trace out = std::move(in);
  out.records.clear();
  out.demand_ids.clear();
  out.owners.clear();
  // Each owner's records, in file order; the demands' owners.
  std::vector<std::uint32_t> owner_of_demand(demand_ids.size(), kNone);
  std::vector<std::vector<std::uint32_t>> records_of(owners.size());
  std::vector<std::uint32_t> shared;  // Records of no owner (faults, throttles).
  for (std::uint32_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    std::uint32_t owner = kNone;
    switch (r.op) {
      case Op::subscribe:
        owner_of_demand[r.demand] = r.owner;
        owner = r.owner;
        break;
      case Op::cancel:
      case Op::set_priority:
        owner = owner_of_demand[r.demand];
        break;
      case Op::end_owner:
        owner = r.owner;
        break;
      case Op::fault:
      case Op::throttle:
        break;
    }
    if (owner == kNone) {
      shared.push_back(i);
    } else {
      records_of[owner].push_back(i);
    }
  }

  std::uint64_t state = seed ^ 0x5265'73616D706Cull;  // "Resampl": not the jitter's stream.
  const auto n = static_cast<std::uint32_t>(owners.size());
  std::vector<std::uint32_t> copies(n, 0);
  // (time, the record's place in the file, draw): at equal times the file's
  // order holds (a fault before the subscribe it was written for), copies after
  // one another.
  struct Placed {
    Record record;
    std::uint32_t position;
    std::uint32_t draw;
  };
  std::vector<Placed> placed;
  placed.reserve(records.size());
  std::vector<std::uint32_t> new_demand(demand_ids.size(), kNone);
  std::vector<std::string> demand_names;  // By provisional demand index.
  for (std::uint32_t draw = 0; draw < n; ++draw) {
    const std::uint32_t owner = below(state, n);
    const std::uint32_t copy = ++copies[owner];
    const std::string suffix = copy == 1 ? "" : "#" + std::to_string(copy);
    const auto new_owner = static_cast<std::uint32_t>(out.owners.size());
    out.owners.push_back(owners[owner] + suffix);
    for (std::uint32_t i : records_of[owner]) {
      Record r = records[i];
      if (r.op == Op::subscribe || r.op == Op::end_owner) r.owner = new_owner;
      if (r.op == Op::subscribe) {
        new_demand[r.demand] = static_cast<std::uint32_t>(demand_names.size());
        demand_names.push_back(demand_ids[r.demand] + suffix);
      }
      if (r.op == Op::subscribe || r.op == Op::cancel || r.op == Op::set_priority) {
        r.demand = new_demand[r.demand];
      }
      placed.push_back(Placed{r, i, draw});
    }
  }
  for (std::uint32_t i : shared)
    placed.push_back(Placed{records[i], i, n});
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    if (a.record.t != b.record.t) return a.record.t < b.record.t;
    return a.position != b.position ? a.position < b.position : a.draw < b.draw;
  });
  // Demands are numbered in subscribe order, as read_trace numbers them.
  std::vector<std::uint32_t> final_index(demand_names.size(), kNone);
  out.records.reserve(placed.size());
  for (Placed& p : placed) {
    Record& r = p.record;
    if (r.op == Op::subscribe) {
      final_index[r.demand] = static_cast<std::uint32_t>(out.demand_ids.size());
      out.demand_ids.push_back(demand_names[r.demand]);
    }
    if (r.op == Op::subscribe || r.op == Op::cancel || r.op == Op::set_priority) {
      r.demand = final_index[r.demand];
    }
    out.records.push_back(r);
  }
  return out;
}

}  // namespace dfl::format
