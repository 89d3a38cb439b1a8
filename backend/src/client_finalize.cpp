// The finalize pool (seal, the core's install decision, commit; another
// process's install adopted) and the delivery thread (client_impl.h).
#include "client_impl.h"


namespace dfl::backend {
void Client::Impl::finalize_loop() {
  for (;;) {
    FinalizeJob job;
    {
      std::unique_lock lock(finalize_mutex_);
      finalize_cv_.wait(lock, [this] { return finalize_stop_ || !finalize_jobs_.empty(); });
      if (finalize_stop_) return;
      job = std::move(finalize_jobs_.front());
      finalize_jobs_.pop_front();
    }
    Ready ready;
    {
      std::lock_guard lock(ready_mutex_);
      if (auto node = ready_.extract(job.task.value)) ready = std::move(node.mapped());
    }
    if (ready.installed_elsewhere) {
      adopt_install(job);
      continue;
    }
    if (!ready.staging) {  // Its files were dropped: nothing to install.
      finalize_ended(job, 0, FinalizeStatus::error, "staged bytes lost");
      continue;
    }
    const std::uint64_t bytes = ready.staging->bytes();
    auto sealed = cache_.seal(*ready.staging);
    // A refused body's file is gone before anybody hears of it.
    if (auto* error = std::get_if<IoError>(&sealed)) {
      const std::string reason = error->message;
      // A full disk may have room later (as for a write while the body
      // arrived): fetched again from byte 0, its bytes given back now.
      const FinalizeStatus status =
          error->no_space ? FinalizeStatus::verify_failed : FinalizeStatus::error;
      ready.staging.reset();
      finalize_ended(job, bytes, status, reason);
      continue;
    }
    const CacheDir::Sealed body = std::get<CacheDir::Sealed>(sealed);
    if (auto refusal = decide(job.task, body)) {
      // Fetched again from byte 0 (once per body, whoever expects what),
      // unless the origin sent these same bytes last time too.
      ready.staging.reset();
      finalize_ended(job, bytes,
                     refusal->again ? FinalizeStatus::verify_failed : FinalizeStatus::error,
                     refusal->why);
      continue;
    }
    // Reports on this thread, or on the cache's committer once the install
    // is durable; the key's lock goes once the demands have their verdicts.
    auto lock = std::make_shared<std::optional<CacheDir::KeyLock>>(std::move(ready.lock));
    cache_.commit_async(std::move(*ready.staging), std::nullopt, std::nullopt,
                        [this, job = std::move(job), bytes, lock](std::optional<IoError> error) {
                          if (error) {
                            finalize_ended(job, bytes, FinalizeStatus::error, error->message);
                          } else {
                            finalize_ended(job, bytes, FinalizeStatus::installed, {});
                          }
                          lock->reset();
                        });
  }
}

// Whether the body is installed (the rule: ClientCore::decide_install).
std::optional<Refusal> Client::Impl::decide(TaskId task, const CacheDir::Sealed& body) {
  std::lock_guard lock(mutex_);
  return core_.decide_install(task, body.bytes, body.sha256);
}

// Another fetch installed the key: checked (its size and digest, for the
// verdicts) and held until the task's demands have theirs.
void Client::Impl::adopt_install(const FinalizeJob& job) {
  auto info = cache_.stat_object(job.key, /*with_digest=*/true);
  auto held = info ? objects_.hold(job.key) : nullptr;
  if (!info || !held) {
    finalize_ended(job, 0, FinalizeStatus::verify_failed,
                   "installed by another process, then evicted");
    return;
  }
  {
    std::lock_guard lock(mutex_);
    core_.adopted(job.task, ObjectFacts{info->size, info->sha256}, std::move(held));
  }
  finalize_ended(job, 0, FinalizeStatus::installed, {});
}

void Client::Impl::finalize_ended(const FinalizeJob& job, std::uint64_t bytes, FinalizeStatus status,
                    const std::string& reason) {
  std::lock_guard lock(mutex_);
  core_.finalize_ended(now(), job, bytes, status, reason);
  dispatch_locked();
}

void Client::Impl::delivery_loop() {
  for (;;) {
    std::deque<DeliverJob> batch;
    {
      std::unique_lock lock(delivery_mutex_);
      delivery_cv_.wait(lock, [this] { return delivery_stop_ || !deliveries_.empty(); });
      if (deliveries_.empty() && delivery_stop_) return;
      batch.swap(deliveries_);
    }
    for (DeliverJob& d : batch) {
      if (options_.executor) {
        // An executor's task is copyable; the result (with its pin) is not.
        auto result = std::make_shared<DemandResult>(std::move(d.result));
        options_.executor([cb = std::move(d.callback), result] {
          if (cb) cb(std::move(*result));
        });
      } else if (d.callback) {
        d.callback(std::move(d.result));  // No lock held: it may call back into the client.
      }
    }
  }
}

}  // namespace dfl::backend
