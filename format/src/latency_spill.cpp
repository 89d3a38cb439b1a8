// LatencySpill (result.h): exact nearest-rank percentiles of a streamed run's
// latencies, from a temporary file rather than memory.
//
// Each percentile is the value of a given rank in its group (all succeeded
// demands, or those of one priority). A double's bits, mapped so that their
// unsigned order is the numbers' order, are selected 16 bits at a time: a pass
// over the file counts, for every rank still open, the values that agree with
// its prefix so far by their next 16 bits, and the rank's bucket is where the
// counts pass it. When the bucket holds few enough values, the next pass
// collects them and selects the rank among them directly. The answer is the
// very value compute_latencies() selects in memory (LatencySpill.* tests).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "demandflight/format/result.h"

namespace dfl::format {
namespace {

// A value with its priority; 12 bytes in the file (copied in and out of the
// byte buffers: a packed struct would be read misaligned).
struct Entry {
  double value;
  std::int32_t priority;
};
constexpr std::size_t kEntryBytes = sizeof(double) + sizeof(std::int32_t);

// Unsigned order = numeric order (NaN excepted, which latencies never are).
std::uint64_t order_key(double value) {
  const auto bits = std::bit_cast<std::uint64_t>(value);
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

// A rank to find in one group.
struct Target {
  bool all = false;  // The group of every value, or
  Priority priority = 0;  // of this priority.
  std::uint64_t rank = 0;       // 0-based, within what still agrees with the prefix.
  std::uint64_t prefix = 0;     // The key's top `prefix_bits` bits found so far.
  int prefix_bits = 0;
  std::uint64_t candidates = 0;  // Values agreeing with the prefix.
  bool collect = false;          // Next pass: gather them and select.
  std::vector<std::uint32_t> histogram;
  std::vector<double> gathered;
  std::optional<double> answer;

  bool wants(const Entry& e) const { return all || e.priority == priority; }
  bool agrees(std::uint64_t key) const {
    return prefix_bits == 0 || (key >> (64 - prefix_bits)) == prefix;
  }
};

constexpr std::size_t kTargetsPerPass = 48;                       // 12 MB of histograms.

}  // namespace

struct LatencySpill::Impl {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{std::tmpfile(), &std::fclose};
  static constexpr std::size_t kChunk = 1 << 16;  // Entries per write and read.
  std::vector<char> buffer = std::vector<char>(kChunk * kEntryBytes);
  std::size_t buffered = 0;  // Entries in buffer.
  std::map<Priority, std::uint64_t> count_by_priority;

  void add(const Entry& e) {
    char* at = buffer.data() + buffered * kEntryBytes;
    std::memcpy(at, &e.value, sizeof e.value);
    std::memcpy(at + sizeof e.value, &e.priority, sizeof e.priority);
    if (++buffered == kChunk) flush();
  }

  void flush() {
    if (buffered == 0) return;
    if (std::fwrite(buffer.data(), kEntryBytes, buffered, file.get()) != buffered)
      throw std::runtime_error("writing latencies to a temporary file failed");
    buffered = 0;
  }

  template <class F>
  void each(F&& f) {
    std::rewind(file.get());
    std::vector<char> chunk(kChunk * kEntryBytes);
    for (;;) {
      const std::size_t n = std::fread(chunk.data(), kEntryBytes, kChunk, file.get());
      for (std::size_t i = 0; i < n; ++i) {
        Entry e;
        std::memcpy(&e.value, chunk.data() + i * kEntryBytes, sizeof e.value);
        std::memcpy(&e.priority, chunk.data() + i * kEntryBytes + sizeof e.value,
                    sizeof e.priority);
        f(e);
      }
      if (n < kChunk) break;
    }
    if (std::ferror(file.get())) throw std::runtime_error("reading latencies back failed");
  }

  // Finds every target's value (a batch: see kTargetsPerPass).
  void select(std::vector<Target*>& targets, std::uint64_t collect_at_most) {
    for (;;) {
      std::vector<Target*> open;
      for (Target* t : targets) {
        if (t->answer) continue;
        open.push_back(t);
        if (t->collect) {
          t->gathered.clear();
          t->gathered.reserve(t->candidates);
        } else {
          t->histogram.assign(1 << 16, 0);
        }
      }
      if (open.empty()) return;
      each([&](const Entry& e) {
        const std::uint64_t key = order_key(e.value);
        for (Target* t : open) {
          if (!t->wants(e) || !t->agrees(key)) continue;
          if (t->collect) {
            t->gathered.push_back(e.value);
          } else {
            ++t->histogram[(key >> (48 - t->prefix_bits)) & 0xffff];
          }
        }
      });
      for (Target* t : open) {
        if (t->collect) {
          auto nth = t->gathered.begin() + static_cast<std::ptrdiff_t>(t->rank);
          std::nth_element(t->gathered.begin(), nth, t->gathered.end());
          t->answer = *nth;
          t->gathered = {};
          continue;
        }
        std::uint64_t below = 0;
        std::uint32_t bucket = 0;
        while (below + t->histogram[bucket] <= t->rank) below += t->histogram[bucket++];
        t->rank -= below;
        t->candidates = t->histogram[bucket];
        t->prefix = (t->prefix << 16) | bucket;
        t->prefix_bits += 16;
        t->histogram = {};
        if (t->prefix_bits == 64) {
          const std::uint64_t key = t->prefix;
          const std::uint64_t bits =
              (key >> 63) != 0 ? key & ~(std::uint64_t{1} << 63) : ~key;
          t->answer = std::bit_cast<double>(bits);
        } else if (t->candidates <= collect_at_most) {
          t->collect = true;
        }
      }
    }
  }
};

LatencySpill::LatencySpill(std::uint64_t collect_at_most)
    : impl_(std::make_unique<Impl>()), collect_at_most_(collect_at_most) {
  if (!impl_->file) throw std::runtime_error("cannot create a temporary file for latencies");
}

LatencySpill::~LatencySpill() = default;

void LatencySpill::add(Priority priority, double latency_s) {
  impl_->add(Entry{latency_s, priority});
  ++impl_->count_by_priority[priority];
  ++count_;
}

void LatencySpill::finish(Summary& summary) {
  impl_->flush();
  std::fflush(impl_->file.get());
  // The ranks of percentiles() (result.cpp): ceil(q * n), from 1.
  auto rank_of = [](double q, std::uint64_t n) {
    const auto index =
        static_cast<std::uint64_t>(std::max(1.0, std::ceil(q * static_cast<double>(n)))) - 1;
    return std::min(index, n - 1);
  };
  constexpr std::array<double, 3> kQ = {0.50, 0.95, 0.99};
  std::vector<Target> targets;
  auto add_group = [&](bool all, Priority priority, std::uint64_t n) {
    for (double q : kQ) {
      Target t;
      t.all = all;
      t.priority = priority;
      t.rank = rank_of(q, n);
      t.candidates = n;
      t.collect = n <= collect_at_most_;
      targets.push_back(std::move(t));
    }
  };
  summary.latency_s = Percentiles{};
  summary.latency_s_by_priority.clear();
  if (count_ == 0) return;
  add_group(true, 0, count_);
  for (const auto& [priority, n] : impl_->count_by_priority)
    add_group(false, priority, n);
  for (std::size_t begin = 0; begin < targets.size(); begin += kTargetsPerPass) {
    std::vector<Target*> batch;
    for (std::size_t i = begin; i < std::min(targets.size(), begin + kTargetsPerPass); ++i)
      batch.push_back(&targets[i]);
    impl_->select(batch, collect_at_most_);
  }
  auto fill = [&](std::size_t first, Percentiles& p) {
    p.p50 = targets[first].answer;
    p.p95 = targets[first + 1].answer;
    p.p99 = targets[first + 2].answer;
  };
  fill(0, summary.latency_s);
  std::size_t next = 3;
  for (const auto& [priority, n] : impl_->count_by_priority) {
    fill(next, summary.latency_s_by_priority[priority]);
    next += 3;
  }
}

}  // namespace dfl::format
