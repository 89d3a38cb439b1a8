// The public Scheduler: each call forwards to Scheduler::Impl
// (scheduler_impl.h). See scheduler.h for the contract and docs/design.md §3
// for the life cycle.
#include "demandflight/engine/scheduler.h"

#include "scheduler_impl.h"

namespace dfl {

std::optional<std::string> origins_problem(OriginId origin, std::span<const OriginId> mirrors,
                                           std::uint32_t max_origins) {
  auto too_high = [&](std::string field, OriginId o) {
    return field.append(std::to_string(o))
        .append(" is not below max_origins (")
        .append(std::to_string(max_origins))
        .append(")");
  };
  if (origin >= max_origins) return too_high("origin: ", origin);
  if (mirrors.size() >= kMaxOriginsPerArtifact) {
    return std::string("mirrors: at most ")
        .append(std::to_string(kMaxOriginsPerArtifact - 1))
        .append(", got ")
        .append(std::to_string(mirrors.size()));
  }
  for (const OriginId m : mirrors)
    if (m >= max_origins) return too_high("mirrors: origin ", m);
  return std::nullopt;
}

// --- Public facade ---------------------------------------------------------

Scheduler::Scheduler(SchedulerConfig config, std::shared_ptr<OrphanPolicy> orphan_policy)
    : impl_(std::make_unique<Impl>(config, std::move(orphan_policy))) {}
Scheduler::~Scheduler() = default;
Scheduler::Scheduler(Scheduler&&) noexcept = default;
Scheduler& Scheduler::operator=(Scheduler&&) noexcept = default;

DemandHandle Scheduler::subscribe(double now_s, const ArtifactKey& key,
                                  const DemandOptions& options) {
  return impl_->subscribe(now_s, key, nullptr, impl_->key_hash(key), options);
}
std::size_t Scheduler::key_hash(const ArtifactKey& key) const {
  return impl_->key_hash(key);
}
DemandHandle Scheduler::subscribe(double now_s, const ArtifactKey& key, std::size_t key_hash,
                                  const DemandOptions& options) {
#ifndef NDEBUG
  DFL_ASSERT(key_hash == impl_->key_hash(key), "subscribe with a hash that is not key_hash(key)");
#endif
  return impl_->subscribe(now_s, key, nullptr, key_hash, options);
}
DemandHandle Scheduler::subscribe(double now_s, const KeyRef& key, std::size_t key_hash,
                                  const DemandOptions& options) {
  DFL_ASSERT(key, "subscribe with an empty KeyRef");
#ifndef NDEBUG
  DFL_ASSERT(key_hash == impl_->key_hash(*key), "subscribe with a hash that is not key_hash(key)");
#endif
  return impl_->subscribe(now_s, *key, &key, key_hash, options);
}
void Scheduler::cancel(double now_s, DemandHandle demand) {
  impl_->cancel(now_s, demand);
}
void Scheduler::set_priority(double now_s, DemandHandle demand, Priority priority) {
  impl_->set_priority(now_s, demand, priority);
}
void Scheduler::hold_starts(double now_s, std::optional<Priority> at_or_below) {
  impl_->hold_starts(now_s, at_or_below);
}
void Scheduler::end_owner(double now_s, OwnerId owner, std::optional<OwnerGeneration> generation) {
  impl_->end_owner(now_s, owner, generation);
}
void Scheduler::set_progress_probe(std::function<std::uint64_t(TransferId)> probe) {
  impl_->set_progress_probe(std::move(probe));
}
void Scheduler::on_transfer_progress(double now_s, TransferId transfer,
                                     std::uint64_t bytes_received) {
  impl_->on_transfer_progress(now_s, transfer, bytes_received);
}
void Scheduler::on_transfer_finished(double now_s, TransferId transfer, TransferStatus status,
                                     std::uint64_t bytes_received,
                                     std::optional<double> retry_after_s) {
  impl_->on_transfer_finished(now_s, transfer, status, bytes_received, retry_after_s);
}
void Scheduler::on_finalize_finished(double now_s, FinalizeId finalize, FinalizeStatus status) {
  impl_->on_finalize_finished(now_s, finalize, status);
}
void Scheduler::on_timer(double now_s) {
  impl_->on_timer(now_s);
}
void Scheduler::note_installed(double now_s, const ArtifactKey& key, std::uint64_t size_bytes) {
  impl_->note_installed(now_s, key, size_bytes);
}
void Scheduler::forget_installed(double now_s, const ArtifactKey& key) {
  impl_->forget_installed(now_s, key);
}
std::optional<double> Scheduler::next_wakeup_s() const {
  return impl_->next_wakeup_s();
}
void Scheduler::take_commands(std::vector<Command>& out) {
  impl_->take_commands(out);
}
std::vector<Command> Scheduler::take_commands() {
  std::vector<Command> out;
  impl_->take_commands(out);
  return out;
}
bool Scheduler::has_commands() const {
  return impl_->has_commands();
}
std::optional<TaskInfo> Scheduler::task_for(const ArtifactKey& key) const {
  return impl_->task_for(key);
}
std::optional<DemandInfo> Scheduler::demand(DemandHandle handle) const {
  return impl_->demand(handle);
}
std::optional<TaskInfo> Scheduler::task_of(DemandHandle handle) const {
  return impl_->task_of(handle);
}
std::vector<TaskInfo> Scheduler::tasks() const {
  return impl_->tasks();
}
std::size_t Scheduler::live_tasks() const {
  return impl_->live_tasks();
}
std::size_t Scheduler::live_demands() const {
  return impl_->live_demands();
}
std::size_t Scheduler::remembered_keys() const {
  return impl_->remembered_keys();
}
std::optional<std::uint64_t> Scheduler::kept_partial(const ArtifactKey& key) const {
  return impl_->kept_partial(key);
}
std::uint64_t Scheduler::kept_partial_bytes() const {
  return impl_->kept_partial_bytes();
}
std::size_t Scheduler::queued_tasks() const {
  return impl_->queued_tasks();
}
std::uint32_t Scheduler::running_transfers() const {
  return impl_->running_transfers();
}
const SchedulerStats& Scheduler::stats() const {
  return impl_->stats();
}
const SchedulerConfig& Scheduler::config() const {
  return impl_->config();
}
double Scheduler::now_s() const {
  return impl_->now();
}
void Scheduler::check_invariants() const {
  impl_->check_invariants();
}

std::string_view to_string(TaskState state) {
  switch (state) {
    case TaskState::queued:
      return "queued";
    case TaskState::transferring:
      return "transferring";
    case TaskState::backoff:
      return "backoff";
    case TaskState::finalizing:
      return "finalizing";
  }
  DFL_UNREACHABLE();
}

}  // namespace dfl
