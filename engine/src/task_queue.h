// TaskQueue: the queued tasks of every origin, ordered by (effective priority
// desc, first-enqueue sequence asc).
//
// Each origin has one bucket per priority level. A bucket has two lanes:
// - the FIFO lane, an intrusive doubly linked list, takes a task whose
//   sequence is newer than every task already in it. A new task always is, so
//   the common push and remove are O(1) with no allocation and no search;
// - the sorted lane takes a task that re-enters with an older sequence (back
//   from retry backoff, or moved by a priority change), in O(log m) for the m
//   tasks in that lane.
// The bucket's head is the older of the two lanes' heads. A balanced tree over
// all queued tasks would do the same in O(log n), but its descent misses the
// cache at every level once the backlog is large; this keeps the cost flat.
//
// Invariant: a task is in at most one bucket of one origin, in one lane; every
// lane is sorted by sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "engine_assert.h"

namespace dfl::detail {

class TaskQueue {
 public:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  struct Entry {
    std::int64_t priority = 0;
    std::uint64_t seq = 0;
    std::uint32_t task = kNone;
  };

  // Queue order: is `a` served before `b`?
  static bool before(const Entry& a, const Entry& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.seq < b.seq;
  }

  void push(std::uint32_t task, std::uint32_t origin, std::int64_t priority, std::uint64_t seq) {
    if (task >= links_.size()) links_.resize(task + 1);
    if (origin >= origins_.size()) origins_.resize(origin + 1);
    Link& link = links_[task];
    DFL_ASSERT(!link.queued, "task queued twice");
    link = Link{};
    link.queued = true;
    link.origin = origin;
    link.priority = priority;
    link.seq = seq;
    Bucket& bucket = origins_[origin].buckets[priority];
    if (bucket.tail == kNone || links_[bucket.tail].seq < seq) {
      link.prev = bucket.tail;
      if (bucket.tail != kNone) {
        links_[bucket.tail].next = task;
      } else {
        bucket.head = task;
      }
      bucket.tail = task;
    } else {
      link.sorted = true;
      bucket.sorted.emplace(seq, task);
    }
    ++origins_[origin].size;
    ++size_;
  }

  void remove(std::uint32_t task) {
    DFL_ASSERT(task < links_.size() && links_[task].queued, "removing a task that is not queued");
    Link& link = links_[task];
    Origin& origin = origins_[link.origin];
    auto bucket_it = origin.buckets.find(link.priority);
    DFL_ASSERT(bucket_it != origin.buckets.end(), "queued task without its bucket");
    Bucket& bucket = bucket_it->second;
    if (link.sorted) {
      const std::size_t erased = bucket.sorted.erase({link.seq, task});
      DFL_ASSERT(erased == 1, "queued task missing from its sorted lane");
    } else {
      if (link.prev != kNone) {
        links_[link.prev].next = link.next;
      } else {
        bucket.head = link.next;
      }
      if (link.next != kNone) {
        links_[link.next].prev = link.prev;
      } else {
        bucket.tail = link.prev;
      }
    }
    if (bucket.head == kNone && bucket.sorted.empty()) origin.buckets.erase(bucket_it);
    link = Link{};
    --origin.size;
    --size_;
  }

  bool contains(std::uint32_t task) const { return task < links_.size() && links_[task].queued; }

  // The queued entry of `task` (priority and sequence it is queued under).
  Entry entry(std::uint32_t task) const {
    const Link& link = links_[task];
    return Entry{link.priority, link.seq, task};
  }

  // The next task of `origin` to serve, if any.
  std::optional<Entry> head(std::uint32_t origin) const {
    if (origin >= origins_.size() || origins_[origin].buckets.empty()) return std::nullopt;
    const auto& [priority, bucket] = *origins_[origin].buckets.begin();
    std::optional<Entry> best;
    if (bucket.head != kNone) best = Entry{priority, links_[bucket.head].seq, bucket.head};
    if (!bucket.sorted.empty()) {
      const auto& [seq, task] = *bucket.sorted.begin();
      if (!best || seq < best->seq) best = Entry{priority, seq, task};
    }
    return best;
  }

  std::optional<std::int64_t> top_priority() const {
    std::optional<std::int64_t> top;
    for (const Origin& origin : origins_) {
      if (!origin.buckets.empty()) {
        top = std::max(top.value_or(std::numeric_limits<std::int64_t>::min()),
                       origin.buckets.begin()->first);
      }
    }
    return top;
  }

  std::size_t size() const { return size_; }
  std::size_t size(std::uint32_t origin) const {
    return origin < origins_.size() ? origins_[origin].size : 0;
  }
  std::uint32_t origins() const { return static_cast<std::uint32_t>(origins_.size()); }

  // Visits every queued entry of `origin` in queue order within each lane
  // (for the invariant check): f(entry, sorted_lane).
  template <class F>
  void for_each(std::uint32_t origin, F&& f) const {
    if (origin >= origins_.size()) return;
    for (const auto& [priority, bucket] : origins_[origin].buckets) {
      for (std::uint32_t t = bucket.head; t != kNone; t = links_[t].next) {
        f(Entry{priority, links_[t].seq, t}, false);
      }
      for (const auto& [seq, t] : bucket.sorted)
        f(Entry{priority, seq, t}, true);
    }
  }

 private:
  struct Link {
    bool queued = false;
    bool sorted = false;
    std::uint32_t origin = 0;
    std::int64_t priority = 0;
    std::uint64_t seq = 0;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
  };
  struct Bucket {
    std::uint32_t head = kNone;  // FIFO lane, oldest first.
    std::uint32_t tail = kNone;
    std::set<std::pair<std::uint64_t, std::uint32_t>> sorted;  // (seq, task)
  };
  struct Origin {
    std::map<std::int64_t, Bucket, std::greater<>> buckets;  // Highest priority first.
    std::size_t size = 0;
  };

  std::vector<Link> links_;  // By task slot.
  std::vector<Origin> origins_;
  std::size_t size_ = 0;
};

}  // namespace dfl::detail
