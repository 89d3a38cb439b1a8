// The finalize pool (seal, the core's install decision, commit; another
// process's install adopted) and the delivery thread (client_impl.h).
#include "client_impl.h"

#include <algorithm>
#include <iterator>

namespace dfl::backend {
void Client::Impl::finalize_loop() {
  std::vector<FinalizeJob> jobs;
  for (;;) {
    {
      std::unique_lock lock(finalize_mutex_);
      finalize_cv_.wait(lock, [this] { return finalize_stop_ || !finalize_jobs_.empty(); });
      if (finalize_stop_) return;
      // Batched installs: every job waiting. Per file: one, since each waits
      // on its own fdatasync and the pool's threads wait side by side.
      const std::size_t take =
          options_.install_sync == SyncMode::batched ? finalize_jobs_.size() : 1;
      for (std::size_t i = 0; i < take; ++i) {
        jobs.push_back(std::move(finalize_jobs_.front()));
        finalize_jobs_.pop_front();
      }
    }
    std::vector<Finalized> done = judge(jobs);
    jobs.clear();
    if (options_.install_sync == SyncMode::per_file) {
      install_and_report(done);
      continue;
    }
    // Group commit by combining: the thread that finds no install running
    // installs whatever the others hand over meanwhile, until none is left;
    // the others go back to sealing. One syncfs at a time, and no thread of
    // its own to wake.
    {
      std::lock_guard lock(install_mutex_);
      std::move(done.begin(), done.end(), std::back_inserter(installing_));
      if (install_running_) continue;
      install_running_ = true;
    }
    for (;;) {
      {
        std::lock_guard lock(install_mutex_);
        done.clear();
        done.swap(installing_);
        if (done.empty()) {
          install_running_ = false;
          break;
        }
      }
      install_and_report(done);
    }
  }
}

// Each job's body sealed and judged by the core (one lock for all); what
// is left to install keeps its staging file.
std::vector<Client::Impl::Finalized> Client::Impl::judge(std::vector<FinalizeJob>& jobs) {
  std::vector<Finalized> out(jobs.size());
  {
    std::lock_guard lock(ready_mutex_);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      out[i].job = std::move(jobs[i]);
      if (auto node = ready_.extract(out[i].job.task.value)) out[i].ready = std::move(node.mapped());
    }
  }
  std::vector<std::size_t> sealed;  // Their bodies, for the core to judge.
  std::vector<CacheDir::Sealed> bodies;
  for (std::size_t i = 0; i < out.size(); ++i) {
    Finalized& f = out[i];
    if (f.ready.installed_elsewhere) {
      f.end = adopt_install(f.job);
      continue;
    }
    if (!f.ready.staging) {  // Its files were dropped: nothing to install.
      f.end.reason = "staged bytes lost";
      continue;
    }
    f.end.bytes = f.ready.staging->bytes();
    auto body = cache_.seal(*f.ready.staging);
    // A refused body's file is gone before anybody hears of it.
    if (auto* error = std::get_if<IoError>(&body)) {
      // A full disk may have room later (as for a write while the body
      // arrived): fetched again from byte 0, its bytes given back now.
      f.end.status = error->no_space ? FinalizeStatus::verify_failed : FinalizeStatus::error;
      f.end.reason = error->message;
      f.ready.staging.reset();
      continue;
    }
    sealed.push_back(i);
    bodies.push_back(std::get<CacheDir::Sealed>(body));
  }
  if (sealed.empty()) return out;
  std::vector<std::optional<Refusal>> refusals(sealed.size());
  {
    std::lock_guard lock(mutex_);
    for (std::size_t k = 0; k < sealed.size(); ++k)
      refusals[k] = core_.decide_install(out[sealed[k]].job.task, bodies[k].bytes, bodies[k].sha256);
  }
  for (std::size_t k = 0; k < sealed.size(); ++k) {
    if (auto& refusal = refusals[k]) {
      // Fetched again from byte 0 (once per body, whoever expects what),
      // unless the origin sent these same bytes last time too.
      Finalized& f = out[sealed[k]];
      f.end.status = refusal->again ? FinalizeStatus::verify_failed : FinalizeStatus::error;
      f.end.reason = std::move(refusal->why);
      f.ready.staging.reset();
    }
  }
  return out;
}

// The accepted bodies installed together (CacheDir::commit_all), and every
// job's end told to the core under one lock; the key locks and the new
// objects' holds go after that, once the demands have their verdicts.
void Client::Impl::install_and_report(std::vector<Finalized>& batch) {
  std::vector<CacheDir::Commit> commits;
  std::vector<std::size_t> committed;  // Their jobs.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    std::optional<CacheDir::Staging>& staging = batch[i].ready.staging;
    if (!staging) continue;
    commits.push_back(CacheDir::Commit{std::move(*staging), {}, {}});
    staging.reset();
    committed.push_back(i);
  }
  std::vector<CacheDir::Committed> installs = cache_.commit_all(std::move(commits));
  for (std::size_t k = 0; k < installs.size(); ++k) {
    FinalizeEnd& end = batch[committed[k]].end;
    if (installs[k].error) {
      end.reason = std::move(installs[k].error->message);
    } else {
      end.status = FinalizeStatus::installed;
    }
  }
  std::vector<std::unique_ptr<ObjectHold>> holds(batch.size());  // Each install's, for its pins.
  for (std::size_t k = 0; k < installs.size(); ++k) {
    if (installs[k].hold) holds[committed[k]] = CacheObjects::wrap(std::move(installs[k].hold));
  }
  CoreLock core(*this);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Finalized& f = batch[i];
    core_.finalize_ended(now(), f.job, f.end.bytes, f.end.status, f.end.reason,
                         std::move(holds[i]));
  }
  core.dispatch();
}  // The core's lock goes; the key locks go with `batch`.

// Another fetch installed the key: checked (its size and digest, for the
// verdicts) and held until the task's demands have theirs.
Client::Impl::FinalizeEnd Client::Impl::adopt_install(const FinalizeJob& job) {
  auto info = cache_.stat_object(job.key, /*with_digest=*/true);
  auto held = info ? objects_.hold(job.key) : nullptr;
  if (!info || !held)
    return {0, FinalizeStatus::verify_failed, "installed by another process, then evicted"};
  {
    std::lock_guard lock(mutex_);
    core_.adopted(job.task, ObjectFacts{info->size, info->sha256}, std::move(held));
  }
  return {0, FinalizeStatus::installed, {}};
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
      if (d.report) {  // A progress report (ClientOptions::on_progress).
        if (options_.executor) {
          options_.executor(std::move(d.report));
        } else {
          d.report();
        }
      } else if (options_.executor) {
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
