// Trace generators for `demandflight gen`: one synthetic workload per bundled
// scenario kind, written in the trace format (docs/trace-format.md).
//
// Every generator streams: a record is written as soon as it is decided, and
// the only state kept is what is in flight (the demands a cell or session still
// holds, and records already decided for a later time), so a million demands
// take constant memory. A record decided for a later time (a cancel, an
// end_owner, a late subscribe) is held by the trace writer (trace_writer.h)
// and written once the clock passes it, which keeps `t` non-decreasing.
// Time is kept in integer microseconds and written as the double nearest
// each (a monotonic mapping), so no rounding can reverse two records.
//
// Output depends only on (kind, seed, demands, max_transfers): randomness comes
// from std::mt19937_64 (whose sequence the standard fixes) turned into numbers
// by our own arithmetic, never by std::*_distribution (whose output differs
// between standard libraries); no libm function is used on random values.
//
// The models, and why each exists:
//
// three_callers: the story of docs/design.md §1 with contention, fixed
//   content. One transfer slot is held by a background terrain download while
//   `rock` is wanted by a background prefetch, then by the camera (critical)
//   and by a session (high) that is destroyed, and then the camera cancels.
//   Transfers take about two seconds, so whether the queued `rock` task keeps
//   the camera's priority after the camera left decides whether `grass`
//   (normal) or `rock` gets the slot next: the legacy max-ever rule and the
//   demand model disagree here.
//
// open_world_streaming: a camera moves through a grid of cells (a torus, so a
//   long run keeps revisiting the world and the catalogue stays bounded), each
//   cell holding 2 to 6 objects of 0.2 to 8 MB. A prefetch ring (owner
//   "prefetch", priority 0) holds the objects of the cells ahead of the camera
//   and cancels them when their cell leaves the ring; cells in view get a
//   critical load (owner "render", priority 3, sometimes with a timeout) that
//   is cancelled when the cell leaves view. The ring reaches further than the
//   view, so most render loads join a task the prefetch already started: this
//   is the sharing the demand model exists for. When the camera turns, some
//   prefetch demands straight ahead are raised to 2, and those raised earlier
//   that are no longer ahead are lowered back to 0, so priorities move both
//   ways on shared tasks.
//
// session_churn: short-lived sessions each preload 3 to 20 popular artifacts
//   (Zipf over a catalogue, so sessions overlap) at priority 1 or 2 and are
//   destroyed with end_owner 0.5 to 5 s later. Sessions reuse a small pool of
//   owner names with increasing owner_generation, and some get a late
//   subscribe with their old generation after their end_owner: the stale
//   generation must end at once, not resurrect the session. A background
//   owner "prefetch" asks for popular artifacts at priority 0 meanwhile, so
//   ending a session often leaves a task with only background demand.
//
// flaky_network: a steady request stream from four owners (priorities 0 to
//   3), some with timeouts and some cancelled, over three origins, with about
//   one fault per 20 demands: transfer errors (mostly retryable), corrupt
//   downloads and origin outages. A fault is written just before a subscribe
//   of the artifact it names, so it meets a transfer that is about to start
//   and the retry, backoff and verification paths actually run.
//
// cache_pressure: a catalogue of several GB against a 200 MB cache, requests
//   drawn Zipf-like so that popular artifacts hit the cache and the tail keeps
//   evicting; mostly priority 1, some background and critical, a few cancels.
//   It measures hits, evictions and the waste of orphaned completions.
#include "demandflight/format/generator.h"

#include "demandflight/format/trace_writer.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dfl::format {
namespace {

constexpr std::uint64_t kUsPerS = 1'000'000;
constexpr std::uint64_t kMB = 1'000'000;

// --- Randomness --------------------------------------------------------------

// mt19937_64 with our own derivations, so the same seed gives the same numbers
// with every standard library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n), n > 0. The modulo bias is below 2^-40 for the small n used here.
  std::uint64_t below(std::uint64_t n) { return engine_() % n; }

  // Uniform in [lo, hi].
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo + 1); }

  // True with probability per_mille / 1000.
  bool chance(std::uint64_t per_mille) { return below(1000) < per_mille; }

 private:
  std::mt19937_64 engine_;
};

// A stateless hash for properties that must not depend on the order of
// events, such as the objects of a cell and their sizes (splitmix64's mixer).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Zipf with exponent 1 over ranks 0..n-1: rank k has weight 1/(k+1). The
// cumulative weights use only IEEE additions and divisions, so sampling is
// exact and portable; rank 0 is the most popular.
class Zipf {
 public:
  explicit Zipf(std::uint64_t n) {
    cumulative_.reserve(n);
    double total = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      total += 1.0 / static_cast<double>(k + 1);
      cumulative_.push_back(total);
    }
  }

  std::uint64_t sample(Rng& rng) const {
    const double x = rng.uniform() * cumulative_.back();
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), x);
    const auto rank = static_cast<std::uint64_t>(it - cumulative_.begin());
    return std::min<std::uint64_t>(rank, cumulative_.size() - 1);
  }

 private:
  std::vector<double> cumulative_;
};

// Integer square root, for catalogue sizes that grow sublinearly with demands.
std::uint64_t isqrt(std::uint64_t n) {
  std::uint64_t r = 0;
  for (std::uint64_t bit = std::uint64_t{1} << 31; bit != 0; bit >>= 1) {
    const std::uint64_t c = r | bit;
    if (c * c <= n) r = c;
  }
  return r;
}

// --- Writing -----------------------------------------------------------------------

void append_uint(std::string& s, std::uint64_t v) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  s.append(digits, end);
}

// Microseconds as seconds: the double nearest the exact decimal (the one a
// reader of "1.234567" gets), and monotonic, so records keep their order.
double seconds(std::uint64_t us) { return static_cast<double>(us) / 1e6; }

// "d<id>": a generated demand's id.
std::string demand_name(std::uint64_t id) {
  std::string name = "d";
  append_uint(name, id);
  return name;
}

struct OriginLink {
  const char* name;
  std::uint64_t bandwidth_Bps;
  std::uint64_t latency_us;
};

// What a generator sets in the header; every field is written.
struct HeaderSpec {
  std::uint64_t client_bandwidth_Bps = 12'500'000;
  std::uint64_t client_latency_us = 10'000;
  std::vector<OriginLink> origins;
  std::uint64_t disk_write_Bps = 400'000'000;
  std::uint64_t hash_Bps = 800'000'000;
  std::uint64_t max_transfers = 4;
  std::uint64_t max_per_origin = 4;
  std::uint64_t cache_bytes = 2'000'000'000;
  std::uint64_t retry_max_attempts = 4;
  std::uint64_t retry_base_us = 500'000;
  std::uint64_t retry_cap_us = 8'000'000;
  std::uint64_t retry_jitter_per_mille = 200;
};

TraceHeader trace_header(std::string_view kind, std::uint64_t seed, const HeaderSpec& h) {
  TraceHeader t;
  t.name = kind;
  t.seed = seed;
  t.platform.client_bandwidth_Bps = static_cast<double>(h.client_bandwidth_Bps);
  t.platform.client_latency_s = seconds(h.client_latency_us);
  t.platform.origins.emplace();
  for (const OriginLink& o : h.origins)
    t.platform.origins->push_back(
        HeaderOrigin{o.name, static_cast<double>(o.bandwidth_Bps), seconds(o.latency_us)});
  t.platform.disk_write_Bps = static_cast<double>(h.disk_write_Bps);
  t.platform.hash_Bps = static_cast<double>(h.hash_Bps);
  t.scheduler.max_transfers = h.max_transfers;
  t.scheduler.max_per_origin = h.max_per_origin;
  t.scheduler.cache_bytes = h.cache_bytes;
  t.scheduler.retry = TraceHeader::Retry{h.retry_max_attempts, seconds(h.retry_base_us),
                                         seconds(h.retry_cap_us),
                                         static_cast<double>(h.retry_jitter_per_mille) / 1000};
  return t;
}

// An artifact line of the generators' kind (target "pc", generation 0).
void declare(TraceWriter& w, std::string_view id, std::string_view resource,
             std::string_view revision, std::uint64_t size_bytes,
             std::span<const std::string_view> origins) {
  ArtifactLine a;
  a.id = id;
  a.resource = resource;
  a.revision = revision;
  a.target = "pc";
  a.size = size_bytes;
  a.origins = origins;
  w.artifact(a);
}

void declare(TraceWriter& w, std::string_view id, std::string_view resource,
             std::string_view revision, std::uint64_t size_bytes, std::string_view origin) {
  declare(w, id, resource, revision, size_bytes, std::span<const std::string_view>(&origin, 1));
}

SubscribeLine subscribe_line(std::uint64_t t_us, const std::string& demand, std::string_view owner,
                             std::string_view artifact, std::uint64_t priority) {
  SubscribeLine line;
  line.t = seconds(t_us);
  line.demand = demand;
  line.owner = owner;
  line.artifact = artifact;
  line.priority = static_cast<std::int64_t>(priority);
  return line;
}

// What every generator shares: the writer, the random stream, the count of
// subscribes against the budget, and a scratch string reused for every record.
class Context {
 public:
  Context(std::string_view kind, const GenOptions& options, std::ostream& out)
      : kind_(kind), options_(options), writer_(out), rng_(options.seed) {}

  void header(HeaderSpec h) {
    if (options_.max_transfers) h.max_transfers = *options_.max_transfers;
    writer_.header(trace_header(kind_, options_.seed, h));
  }

  TraceWriter& writer() { return writer_; }
  Rng& rng() { return rng_; }
  std::string& name() { return name_; }

  std::uint64_t budget() const { return options_.demands; }
  bool mirrors() const { return options_.mirrors; }
  bool budget_left() const { return subscribes_ < options_.demands; }
  // Takes one subscribe from the budget and returns its demand number.
  std::uint64_t next_demand() {
    ++subscribes_;
    return ++last_demand_;
  }

 private:
  std::string_view kind_;
  const GenOptions& options_;
  TraceWriter writer_;
  Rng rng_;
  std::uint64_t subscribes_ = 0;
  std::uint64_t last_demand_ = 0;
  std::string name_;  // Artifact ids and owner names.
};

// A catalogue of numbered artifacts declared lazily, right before first use,
// so a short trace declares only what it touches.
class Catalogue {
 public:
  Catalogue(std::string_view prefix, std::uint64_t size, std::uint64_t seed)
      : prefix_(prefix), declared_(size, false), seed_(seed) {}

  std::uint64_t size() const { return declared_.size(); }

  // Writes "<prefix>-<index>" into `id`.
  void id(std::uint64_t index, std::string& id) const {
    id.assign(prefix_);
    id += '-';
    append_uint(id, index);
  }

  // A stable hash of the artifact, for its size and origin.
  std::uint64_t hash(std::uint64_t index) const { return mix(seed_ ^ mix(index)); }

  template <class Declare>
  void ensure(std::uint64_t index, Declare&& declare) {
    if (declared_[index]) return;
    declared_[index] = true;
    declare();
  }

 private:
  std::string prefix_;
  std::vector<bool> declared_;
  std::uint64_t seed_;
};

// Declares catalogue artifact `index` if needed, with a size of
// [min_bytes, max_bytes] and an origin picked by its hash, and leaves its id in
// ctx.name().
void use_artifact(Context& ctx, Catalogue& cat, std::uint64_t index, std::uint64_t min_bytes,
                  std::uint64_t max_bytes, const std::vector<OriginLink>& origins,
                  std::string_view resource_dir) {
  cat.id(index, ctx.name());
  cat.ensure(index, [&] {
    const std::uint64_t h = cat.hash(index);
    const std::uint64_t size_bytes = min_bytes + (h >> 20) % (max_bytes - min_bytes + 1);
    // The first origin serves most artifacts, as a primary CDN would.
    const std::uint64_t more = mix(h);  // Bits independent of the size's.
    const std::uint64_t pick = more % 10;
    const std::size_t origin =
        pick < 6 || origins.size() == 1 ? 0 : 1 + pick % (origins.size() - 1);
    std::string resource(resource_dir);
    resource += '/';
    resource += ctx.name();
    resource += ".pak";
    std::string revision = "r";
    append_uint(revision, 1 + (more >> 32) % 9);
    if (ctx.mirrors() && origins.size() > 1) {
      // `origin` first, then the others in order.
      std::vector<std::string_view> names{origins[origin].name};
      for (std::size_t i = 0; i < origins.size(); ++i)
        if (i != origin) names.emplace_back(origins[i].name);
      declare(ctx.writer(), ctx.name(), resource, revision, size_bytes, names);
    } else {
      declare(ctx.writer(), ctx.name(), resource, revision, size_bytes, origins[origin].name);
    }
  });
}

// --- three_callers ------------------------------------------------------------------

void three_callers(Context& ctx) {
  HeaderSpec h;
  h.client_bandwidth_Bps = 12'500'000;  // 25 MB in 2 s: long enough for the callers to meet.
  h.origins = {{"cdn", 50'000'000, 30'000}};
  h.max_transfers = 1;   // One slot: who gets it next is the whole question.
  h.max_per_origin = 4;  // Not the binding limit, also under --max-transfers.
  ctx.header(h);
  TraceWriter& w = ctx.writer();
  constexpr std::uint64_t size_bytes = 25 * kMB;
  declare(w, "terrain", "world/terrain_0_0.bin", "r12", size_bytes, "cdn");
  declare(w, "rock", "props/rock_large.mesh", "r3", size_bytes, "cdn");
  declare(w, "grass", "props/grass_patch.mesh", "r7", size_bytes, "cdn");

  struct Sub {
    std::uint64_t t_us;
    const char* owner;
    const char* artifact;
    std::uint64_t priority;
  };
  const Sub subs[] = {{0, "streaming", "terrain", 0},
                      {100'000, "streaming", "rock", 0},
                      {200'000, "ui", "grass", 1},
                      {1'000'000, "camera", "rock", 3},
                      {1'200'000, "session", "rock", 2}};
  std::uint64_t camera_demand = 0;
  for (const Sub& s : subs) {
    const std::uint64_t id = ctx.next_demand();
    if (std::string_view(s.owner) == "camera") camera_demand = id;
    w.write(subscribe_line(s.t_us, demand_name(id), s.owner, s.artifact, s.priority));
  }
  w.write(EndOwnerLine{seconds(1'500'000), "session", std::nullopt});
  w.write(CancelLine{seconds(1'800'000), demand_name(camera_demand)});
}

// --- open_world_streaming -----------------------------------------------------------

// A camera moving over a torus of cells; the ring of cells ahead of it
// prefetches their objects, the cells in view load them to draw.
class OpenWorld {
 public:
  explicit OpenWorld(Context& ctx)
      : ctx_(ctx),
        w_(ctx.writer()),
        rng_(ctx.rng()),
        cells_(static_cast<std::size_t>(kSide * kSide)),
        declared_(cells_.size() * kMaxObjects, false),
        // The world depends on the seed only, so a shorter trace is a prefix
        // of a longer one.
        world_seed_(rng_.below(1ull << 62)) {}

  void run() {
    while (ctx_.budget_left()) {
      ++step_;
      const bool turned = step_ > 1 && move();
      const std::int64_t cx = x_ / kUnit;
      const std::int64_t cy = y_ / kUnit;
      look_around(cx, cy);
      leave();
      enter();
      ring_.swap(next_ring_);
      view_.swap(next_view_);
      if (turned) retarget(cx, cy);
    }
  }

 private:
  // A 64 x 64 torus: big enough that a camera crossing it sees new cells for
  // minutes, small enough that the catalogue (at most 24,576 objects) is bounded.
  static constexpr std::int64_t kSide = 64;
  static constexpr std::int64_t kUnit = 1000;  // Position units per cell.
  static constexpr std::int64_t kRing = 3;     // Prefetch radius, in cells.
  static constexpr std::int64_t kView = 1;     // View radius, in cells.
  static constexpr std::uint64_t kMaxObjects = 6;
  static constexpr int kDirs[8][2] = {{1, 0},  {1, 1},   {0, 1},  {-1, 1},
                                      {-1, 0}, {-1, -1}, {0, -1}, {1, -1}};

  struct Demand {
    std::uint64_t id;
    bool raised;  // Set to 2 by a turn toward its cell.
  };
  struct Cell {
    std::vector<Demand> prefetch;
    std::vector<Demand> render;
    bool in_ring = false;
    bool in_view = false;
    std::uint64_t ring_stamp = 0;  // Last step that found the cell in the ring.
    std::uint64_t view_stamp = 0;  // Last step that found the cell in view.
  };

  static std::int64_t wrap(std::int64_t c) { return ((c % kSide) + kSide) % kSide; }
  static std::size_t cell_index(std::int64_t cx, std::int64_t cy) {
    return static_cast<std::size_t>(wrap(cy) * kSide + wrap(cx));
  }
  std::uint64_t objects_in(std::size_t cell) const { return 2 + mix(world_seed_ ^ cell) % 5; }

  // A step's time passes; the camera may turn or change speed, and moves.
  // Whether it turned.
  bool move() {
    bool turned = false;
    const std::uint64_t dt_us = rng_.between(50'000, 200'000);
    t_us_ += dt_us;
    if (rng_.chance(25)) {  // A turn every 5 s or so.
      // Mostly gentle turns, sometimes a right angle.
      const std::size_t turns[4] = {1, 7, 2, 6};
      dir_ = (dir_ + turns[rng_.below(4)]) % 8;
      turned = true;
    }
    if (rng_.chance(20)) speed_ = rng_.between(300, 900);
    std::int64_t move = static_cast<std::int64_t>(speed_ * dt_us / kUsPerS);
    if (kDirs[dir_][0] != 0 && kDirs[dir_][1] != 0) move = move * 707 / 1000;  // Diagonal.
    x_ = (x_ + kDirs[dir_][0] * move + kSide * kUnit) % (kSide * kUnit);
    y_ = (y_ + kDirs[dir_][1] * move + kSide * kUnit) % (kSide * kUnit);
    return turned;
  }

  // The ring is the half of the (2R+1)^2 square ahead of the camera (sideways
  // included); the view is the 3 x 3 square around it.
  void look_around(std::int64_t cx, std::int64_t cy) {
    next_ring_.clear();
    next_view_.clear();
    for (std::int64_t oy = -kRing; oy <= kRing; ++oy) {
      for (std::int64_t ox = -kRing; ox <= kRing; ++ox) {
        if (ox * kDirs[dir_][0] + oy * kDirs[dir_][1] >= 0)
          next_ring_.push_back(cell_index(cx + ox, cy + oy));
        if (ox >= -kView && ox <= kView && oy >= -kView && oy <= kView) {
          next_view_.push_back(cell_index(cx + ox, cy + oy));
        }
      }
    }
  }

  // Leaving first: a cell out of the ring or view withdraws its demands.
  void leave() {
    for (std::size_t c : next_ring_)
      cells_[c].ring_stamp = step_;
    for (std::size_t c : ring_) {
      Cell& cell = cells_[c];
      if (cell.ring_stamp == step_ || !cell.in_ring) continue;
      cancel_all(cell.prefetch);
      cell.in_ring = false;
    }
    for (std::size_t c : next_view_)
      cells_[c].view_stamp = step_;
    for (std::size_t c : view_) {
      Cell& cell = cells_[c];
      if (cell.view_stamp == step_ || !cell.in_view) continue;
      cancel_all(cell.render);
      cell.in_view = false;
    }
  }

  void cancel_all(std::vector<Demand>& demands) {
    for (const Demand& d : demands)
      w_.write(CancelLine{seconds(t_us_), demand_name(d.id)});
    demands.clear();
  }

  // Entering: the ring prefetches, the view loads what it must draw now.
  void enter() {
    for (std::size_t c : next_ring_) {
      Cell& cell = cells_[c];
      if (cell.in_ring) continue;
      cell.in_ring = true;
      for (std::uint64_t k = 0; k < objects_in(c) && ctx_.budget_left(); ++k) {
        use_object(c, k);
        const std::uint64_t id = ctx_.next_demand();
        w_.write(subscribe_line(t_us_, demand_name(id), "prefetch", ctx_.name(), 0));
        cell.prefetch.push_back(Demand{id, false});
      }
    }
    for (std::size_t c : next_view_) {
      Cell& cell = cells_[c];
      if (cell.in_view) continue;
      cell.in_view = true;
      for (std::uint64_t k = 0; k < objects_in(c) && ctx_.budget_left(); ++k) {
        use_object(c, k);
        const std::uint64_t id = ctx_.next_demand();
        const std::string demand = demand_name(id);
        SubscribeLine line = subscribe_line(t_us_, demand, "render", ctx_.name(), 3);
        // Some renderers fall back to a placeholder rather than wait forever.
        if (rng_.chance(400)) line.timeout_s = seconds(rng_.between(2'000, 5'000) * 1000);
        w_.write(line);
        cell.render.push_back(Demand{id, false});
      }
    }
  }

  // A turn makes the cells straight ahead urgent and the earlier ones not.
  void retarget(std::int64_t cx, std::int64_t cy) {
    ahead_.clear();
    for (std::int64_t k = 1; k <= kRing; ++k)
      ahead_.push_back(cell_index(cx + k * kDirs[dir_][0], cy + k * kDirs[dir_][1]));
    for (std::size_t c : raised_cells_) {
      Cell& cell = cells_[c];
      if (!cell.in_ring || std::find(ahead_.begin(), ahead_.end(), c) != ahead_.end()) continue;
      for (Demand& d : cell.prefetch) {
        if (!d.raised) continue;
        d.raised = false;
        w_.write(SetPriorityLine{seconds(t_us_), demand_name(d.id), 0});
      }
    }
    raised_cells_.clear();
    for (std::size_t c : ahead_) {
      Cell& cell = cells_[c];
      bool any = false;
      for (Demand& d : cell.prefetch) {
        if (d.raised) {
          any = true;
        } else if (rng_.chance(500)) {
          d.raised = true;
          any = true;
          w_.write(SetPriorityLine{seconds(t_us_), demand_name(d.id), 2});
        }
      }
      if (any) raised_cells_.push_back(c);
    }
  }

  // Declares object `k` of `cell` if needed and leaves its id in ctx.name().
  void use_object(std::size_t cell, std::uint64_t k) {
    std::string& id = ctx_.name();
    id = "obj-";
    append_uint(id, cell);
    id += '-';
    append_uint(id, k);
    const std::size_t slot = cell * kMaxObjects + k;
    if (declared_[slot]) return;
    declared_[slot] = true;
    const std::uint64_t hsh = mix(world_seed_ ^ mix(slot + 1));
    // Mostly small props, a few large meshes: the smallest of three uniform draws.
    const std::uint64_t a = mix(hsh + 1) % 7'800'001;
    const std::uint64_t b = mix(hsh + 2) % 7'800'001;
    const std::uint64_t c = mix(hsh + 3) % 7'800'001;
    const std::uint64_t size_bytes = 200'000 + std::min({a, b, c});
    const std::uint64_t more = mix(hsh);  // Bits independent of the size's.
    const std::uint64_t pick = more % 10;
    const char* origin = pick < 7 ? "cdn" : pick < 9 ? "cdn-backup" : "studio";
    std::string resource = "world/cell_";
    append_uint(resource, cell % kSide);
    resource += '_';
    append_uint(resource, cell / kSide);
    resource += "/object_";
    append_uint(resource, k);
    resource += ".mesh";
    std::string revision = "r";
    append_uint(revision, 1 + (more >> 32) % 5);
    declare(w_, id, resource, revision, size_bytes, origin);
  }

  Context& ctx_;
  TraceWriter& w_;
  Rng& rng_;
  std::vector<Cell> cells_;
  std::vector<bool> declared_;
  std::uint64_t world_seed_;
  std::int64_t x_ = kSide / 2 * kUnit + kUnit / 2;
  std::int64_t y_ = x_;
  std::size_t dir_ = 0;
  // Position units per second. About 0.6 cells/s keeps the client link about
  // full: busy enough that priorities decide the order and late prefetches
  // are still queued when their cell leaves the ring.
  std::uint64_t speed_ = 600;
  std::uint64_t t_us_ = 0;
  std::uint64_t step_ = 0;
  std::vector<std::size_t> ring_, view_, next_ring_, next_view_, raised_cells_, ahead_;
};

void open_world_streaming(Context& ctx) {
  HeaderSpec h;
  h.client_bandwidth_Bps = 50'000'000;
  h.client_latency_us = 15'000;
  h.origins = {{"cdn", 80'000'000, 20'000},
               {"cdn-backup", 40'000'000, 60'000},
               {"studio", 30'000'000, 80'000}};
  h.max_transfers = 8;
  h.max_per_origin = 6;
  h.cache_bytes = 1'000'000'000;
  ctx.header(h);
  OpenWorld(ctx).run();
}

// --- session_churn --------------------------------------------------------------------

void session_churn(Context& ctx) {
  const std::vector<OriginLink> origins = {{"cdn", 60'000'000, 25'000},
                                           {"mirror", 35'000'000, 55'000}};
  HeaderSpec h;
  h.client_bandwidth_Bps = 25'000'000;
  h.client_latency_us = 20'000;
  h.origins = origins;
  h.max_transfers = 6;
  h.max_per_origin = 4;
  h.cache_bytes = 1'000'000'000;
  ctx.header(h);
  TraceWriter& w = ctx.writer();
  Rng& rng = ctx.rng();

  // The catalogue grows with the square root of the trace, so sessions keep
  // overlapping on popular artifacts however long the run.
  Catalogue cat("asset", std::min<std::uint64_t>(50'000, 64 + 16 * isqrt(ctx.budget())),
                ctx.rng().below(1ull << 62));
  const Zipf popularity(cat.size());

  // A pool of owner names: a session takes the first name whose previous
  // session has ended, with the next generation; a new name only when all are busy.
  struct Slot {
    std::uint64_t free_at_us = 0;
    std::uint64_t generation = 0;  // Of the last session under this name.
  };
  std::vector<Slot> slots;
  std::uint64_t next_session_us = 0;
  std::uint64_t next_prefetch_us = rng.between(0, 500'000);
  std::vector<std::uint64_t> picked;

  auto subscribe = [&](std::uint64_t t_us, std::string_view owner, std::uint64_t artifact,
                       std::uint64_t priority, const std::uint64_t* generation, bool later) {
    use_artifact(ctx, cat, artifact, 100'000, 8 * kMB, origins, "content");
    const std::string demand = demand_name(ctx.next_demand());
    SubscribeLine line = subscribe_line(t_us, demand, owner, ctx.name(), priority);
    if (generation) line.owner_generation = static_cast<std::int64_t>(*generation);
    if (later) {
      w.hold(line);
    } else {
      w.write(line);
    }
  };

  while (ctx.budget_left()) {
    if (next_prefetch_us < next_session_us) {
      subscribe(next_prefetch_us, "prefetch", popularity.sample(rng), 0, nullptr, false);
      next_prefetch_us += rng.between(200'000, 1'500'000);
      continue;
    }
    const std::uint64_t t_us = next_session_us;
    next_session_us += rng.between(300'000, 2'000'000);

    std::size_t s = 0;
    while (s < slots.size() && slots[s].free_at_us > t_us)
      ++s;
    if (s == slots.size()) slots.push_back(Slot{0, 0});
    Slot& slot = slots[s];
    const std::uint64_t generation = ++slot.generation;
    std::string owner = "session-";
    append_uint(owner, s);

    // Distinct popular artifacts, all asked for when the session loads.
    const std::uint64_t count = rng.between(3, 20);
    const std::uint64_t priority = rng.chance(300) ? 2 : 1;
    picked.clear();
    for (std::uint64_t i = 0; i < count && ctx.budget_left(); ++i) {
      std::uint64_t a = popularity.sample(rng);
      for (int tries = 0; tries < 8 && std::find(picked.begin(), picked.end(), a) != picked.end();
           ++tries) {
        a = popularity.sample(rng);
      }
      if (std::find(picked.begin(), picked.end(), a) != picked.end()) continue;
      picked.push_back(a);
      subscribe(t_us, owner, a, priority, &generation, false);
    }

    const std::uint64_t end_us = t_us + rng.between(500'000, 5'000'000);
    w.hold(EndOwnerLine{seconds(end_us), owner, static_cast<std::int64_t>(generation)});
    slot.free_at_us = end_us;
    // A loader that did not notice its session was destroyed: the stale
    // generation must end at once, whether or not the name was reused since.
    if (rng.chance(120) && ctx.budget_left()) {
      subscribe(end_us + rng.between(50'000, 800'000), owner, popularity.sample(rng), priority,
                &generation, true);
    }
  }
}

// --- flaky_network --------------------------------------------------------------------

void flaky_network(Context& ctx) {
  const std::vector<OriginLink> origins = {
      {"cdn", 80'000'000, 20'000}, {"mirror", 40'000'000, 50'000}, {"origin", 30'000'000, 80'000}};
  HeaderSpec h;
  h.client_bandwidth_Bps = 25'000'000;
  h.client_latency_us = 20'000;
  h.origins = origins;
  h.max_transfers = 6;
  h.max_per_origin = 3;
  h.cache_bytes = 1'000'000'000;
  h.retry_max_attempts = 4;
  ctx.header(h);
  TraceWriter& w = ctx.writer();
  Rng& rng = ctx.rng();

  Catalogue cat("file", std::min<std::uint64_t>(50'000, 64 + 8 * isqrt(ctx.budget())),
                ctx.rng().below(1ull << 62));
  const Zipf popularity(cat.size());
  struct Owner {
    const char* name;
    std::uint64_t priority;
    std::uint64_t share_per_mille;
  };
  const Owner owners[] = {
      {"streaming", 0, 350}, {"ui", 1, 300}, {"gameplay", 2, 200}, {"render", 3, 150}};

  std::uint64_t t_us = 0;
  while (ctx.budget_left()) {
    t_us += rng.between(50'000, 400'000);
    const std::uint64_t artifact = popularity.sample(rng);
    use_artifact(ctx, cat, artifact, 500'000, 12 * kMB, origins, "data");

    // About one fault per 20 demands, just before a subscribe of its artifact.
    if (rng.chance(50)) {
      const std::uint64_t kind = rng.below(10);
      FaultLine fault;
      fault.t = seconds(t_us);
      if (kind < 7) {
        fault.kind = FaultKind::transfer_error;
        fault.artifact = ctx.name();
        fault.count = rng.between(1, 3);
        fault.after_fraction = static_cast<double>(rng.between(100, 900)) / 1000;
        fault.retryable = !rng.chance(150);
      } else if (kind < 9) {
        fault.kind = FaultKind::corrupt;
        fault.artifact = ctx.name();
        fault.count = 1;
      } else {
        fault.kind = FaultKind::origin_down;
        fault.origin = origins[rng.below(origins.size())].name;
        fault.duration_s = seconds(rng.between(1'000, 10'000) * 1000);
      }
      w.write(fault);
    }

    std::uint64_t roll = rng.below(1000);
    const Owner* owner = &owners[0];
    for (const Owner& o : owners) {
      if (roll < o.share_per_mille) {
        owner = &o;
        break;
      }
      roll -= o.share_per_mille;
    }
    const std::uint64_t id = ctx.next_demand();
    const std::string demand = demand_name(id);
    SubscribeLine line = subscribe_line(t_us, demand, owner->name, ctx.name(), owner->priority);
    if (rng.chance(150)) line.timeout_s = seconds(rng.between(3'000, 15'000) * 1000);
    w.write(line);
    if (rng.chance(100)) w.hold(CancelLine{seconds(t_us + rng.between(200'000, 5'000'000)), demand});
  }
}

// --- cache_pressure -------------------------------------------------------------------

void cache_pressure(Context& ctx) {
  const std::vector<OriginLink> origins = {{"cdn", 100'000'000, 20'000},
                                           {"archive", 30'000'000, 70'000}};
  HeaderSpec h;
  h.client_bandwidth_Bps = 50'000'000;
  h.client_latency_us = 10'000;
  h.origins = origins;
  h.max_transfers = 4;
  h.max_per_origin = 4;
  h.cache_bytes = 200'000'000;  // About 20 average artifacts out of 400.
  ctx.header(h);
  TraceWriter& w = ctx.writer();
  Rng& rng = ctx.rng();

  // 400 artifacts of 1 to 20 MB, about 4 GB: twenty times the cache.
  Catalogue cat("blob", 400, ctx.rng().below(1ull << 62));
  const Zipf popularity(cat.size());

  std::uint64_t t_us = 0;
  while (ctx.budget_left()) {
    t_us += rng.between(30'000, 300'000);
    use_artifact(ctx, cat, popularity.sample(rng), 1 * kMB, 20 * kMB, origins, "cache");
    const std::uint64_t roll = rng.below(100);
    const char* owner = roll < 80 ? "loader" : roll < 92 ? "prefetch" : "render";
    const std::uint64_t priority = roll < 80 ? 1 : roll < 92 ? 0 : 3;
    const std::uint64_t id = ctx.next_demand();
    const std::string demand = demand_name(id);
    w.write(subscribe_line(t_us, demand, owner, ctx.name(), priority));
    if (rng.chance(40)) w.hold(CancelLine{seconds(t_us + rng.between(50'000, 2'000'000)), demand});
  }
}

struct Kind {
  const char* name;
  const char* description;
  void (*run)(Context&);
};

constexpr Kind kKinds[] = {
    {"three_callers",
     "the design story: prefetch, camera and session share one asset behind a busy slot",
     three_callers},
    {"open_world_streaming",
     "a camera crossing a cell grid: prefetch ring at 0, critical loads in view, cancels",
     open_world_streaming},
    {"session_churn",
     "short sessions preload popular assets and end; reused owners, stale generations",
     session_churn},
    {"flaky_network",
     "steady mixed-priority requests with transfer errors, corruption and origin outages",
     flaky_network},
    {"cache_pressure", "Zipf requests over a catalogue twenty times the cache: hits and evictions",
     cache_pressure},
};

}  // namespace

std::vector<std::pair<std::string, std::string>> generator_kinds() {
  std::vector<std::pair<std::string, std::string>> kinds;
  for (const Kind& k : kKinds)
    kinds.emplace_back(k.name, k.description);
  return kinds;
}

void generate(std::string_view kind, const GenOptions& options, std::ostream& out) {
  for (const Kind& k : kKinds) {
    if (kind != k.name) continue;
    // The trace format reads seed as a signed 64-bit integer and needs a slot.
    if (options.seed > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw std::invalid_argument("seed must be at most 9223372036854775807");
    }
    if (options.max_transfers && *options.max_transfers == 0) {
      throw std::invalid_argument("max_transfers must be at least 1");
    }
    Context ctx(k.name, options, out);
    k.run(ctx);
    ctx.writer().finish();
    return;
  }
  std::string known;
  for (const Kind& k : kKinds) {
    if (!known.empty()) known += ", ";
    known += k.name;
  }
  throw std::invalid_argument("unknown scenario kind \"" + std::string(kind) +
                              "\" (known: " + known + ")");
}

GenSpec parse_gen_spec(std::string_view spec) {
  const std::string text(spec);
  if (spec.substr(0, 4) != "gen:") {
    throw std::invalid_argument(text + ": a generated trace is gen:KIND[:demands=N]");
  }
  spec.remove_prefix(4);
  GenSpec out;
  const std::size_t colon = spec.find(':');
  out.kind = std::string(spec.substr(0, colon));
  if (std::none_of(std::begin(kKinds), std::end(kKinds), [&](const Kind& k) { return out.kind == k.name; })) {
    std::string known;
    for (const Kind& k : kKinds)
      known += (known.empty() ? "" : ", ") + std::string(k.name);
    throw std::invalid_argument(text + ": unknown scenario kind \"" + out.kind + "\" (known: " +
                                known + ")");
  }
  if (colon == std::string_view::npos) return out;
  std::string_view rest = spec.substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    if (eq == std::string_view::npos || key != "demands") {
      throw std::invalid_argument(text + ": unknown parameter \"" + std::string(key) +
                                  "\" (known: demands)");
    }
    const std::string_view value = item.substr(eq + 1);
    std::uint64_t demands = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), demands);
    if (error != std::errc{} || end != value.data() + value.size() || demands == 0) {
      throw std::invalid_argument(text + ": demands=\"" + std::string(value) +
                                  "\" is not a number of demands (at least 1)");
    }
    out.demands = demands;
  }
  return out;
}

}  // namespace dfl::format
