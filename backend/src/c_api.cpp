// The C API (demandflight/backend/c_api.h): the C++ Client behind opaque
// handles, every exception turned into a status and this thread's message.
#include "demandflight/backend/c_api.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "demandflight/backend/client.h"
#include "demandflight/backend/metrics.h"

using dfl::backend::Client;

struct dfl_options {
  dfl::backend::ClientOptions options;
};

struct dfl_client {
  std::unique_ptr<Client> client;
};

struct dfl_pin {
  dfl::backend::Pin pin;
  std::string path;
};

namespace {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

dfl_status fail(dfl_status status, const std::string& why) {
  last_error() = why;
  return status;
}

// Runs `f`, its exceptions as statuses (the message kept for dfl_last_error).
template <typename F>
dfl_status guarded(const char* call, F&& f) {
  try {
    last_error().clear();
    return f();
  } catch (const std::invalid_argument& e) {
    return fail(DFL_INVALID_ARGUMENT, std::string(call) + ": " + e.what());
  } catch (const std::runtime_error& e) {  // The cache directory, libcurl.
    return fail(DFL_IO_ERROR, std::string(call) + ": " + e.what());
  } catch (const std::exception& e) {
    return fail(DFL_INTERNAL, std::string(call) + ": " + e.what());
  } catch (...) {
    return fail(DFL_INTERNAL, std::string(call) + ": an unknown exception");
  }
}

dfl_status null_argument(const char* call, const char* argument) {
  return fail(DFL_INVALID_ARGUMENT, std::string(call) + ": " + argument + " is NULL");
}

dfl::DemandHandle handle_of(dfl_demand d) { return dfl::DemandHandle{d.slot, d.generation}; }
dfl_demand demand_of(dfl::DemandHandle h) { return dfl_demand{h.slot, h.generation}; }

dfl_stage stage_of(dfl::backend::Stage stage) {
  switch (stage) {
    case dfl::backend::Stage::queued:
      return DFL_QUEUED;
    case dfl::backend::Stage::transferring:
      return DFL_TRANSFERRING;
    case dfl::backend::Stage::retrying:
      return DFL_RETRYING;
    case dfl::backend::Stage::waiting_elsewhere:
      return DFL_WAITING_ELSEWHERE;
    case dfl::backend::Stage::paused:
      return DFL_PAUSED;
    case dfl::backend::Stage::finalizing:
      return DFL_FINALIZING;
  }
  return DFL_QUEUED;
}

dfl_outcome outcome_of(dfl::DemandOutcome outcome) {
  switch (outcome) {
    case dfl::DemandOutcome::succeeded:
      return DFL_SUCCEEDED;
    case dfl::DemandOutcome::failed:
      return DFL_FAILED;
    case dfl::DemandOutcome::cancelled:
      return DFL_CANCELLED;
    case dfl::DemandOutcome::timed_out:
      return DFL_TIMED_OUT;
    case dfl::DemandOutcome::owner_ended:
      return DFL_OWNER_ENDED;
  }
  return DFL_FAILED;
}

}  // namespace

extern "C" {

const char* dfl_last_error(void) { return last_error().c_str(); }

dfl_options* dfl_options_new(void) {
  try {
    return new dfl_options{};
  } catch (...) {
    return nullptr;
  }
}

void dfl_options_free(dfl_options* options) { delete options; }

dfl_status dfl_options_set_cache_dir(dfl_options* options, const char* path) {
  if (options == nullptr) return null_argument("dfl_options_set_cache_dir", "options");
  if (path == nullptr) return null_argument("dfl_options_set_cache_dir", "path");
  return guarded("dfl_options_set_cache_dir", [&] {
    options->options.cache_dir = path;
    return DFL_OK;
  });
}

dfl_status dfl_options_set_url_template(dfl_options* options, const char* pattern) {
  if (options == nullptr) return null_argument("dfl_options_set_url_template", "options");
  if (pattern == nullptr) return null_argument("dfl_options_set_url_template", "pattern");
  return guarded("dfl_options_set_url_template", [&] {
    options->options.resolver = dfl::backend::url_template(pattern);
    return DFL_OK;
  });
}

dfl_status dfl_options_set_max_transfers(dfl_options* options, uint32_t transfers) {
  if (options == nullptr) return null_argument("dfl_options_set_max_transfers", "options");
  if (transfers == 0)
    return fail(DFL_INVALID_ARGUMENT, "dfl_options_set_max_transfers: transfers must be at least 1");
  options->options.scheduler.max_transfers = transfers;
  return DFL_OK;
}

dfl_status dfl_options_set_orphan_policy(dfl_options* options, const char* spec) {
  if (options == nullptr) return null_argument("dfl_options_set_orphan_policy", "options");
  if (spec == nullptr) return null_argument("dfl_options_set_orphan_policy", "spec");
  options->options.orphan_policy = spec;  // Judged when the client is made.
  return DFL_OK;
}

dfl_status dfl_options_set_pins(dfl_options* options, int on) {
  if (options == nullptr) return null_argument("dfl_options_set_pins", "options");
  options->options.pin_on_success = on != 0;
  return DFL_OK;
}

dfl_status dfl_options_set_progress_interval(dfl_options* options, double seconds) {
  if (options == nullptr) return null_argument("dfl_options_set_progress_interval", "options");
  if (!(seconds > 0) || seconds > 3600) {
    return fail(DFL_INVALID_ARGUMENT,
                "dfl_options_set_progress_interval: seconds must be above 0 and at most 3600");
  }
  options->options.progress_interval_s = seconds;
  return DFL_OK;
}

dfl_status dfl_client_new(const dfl_options* options, dfl_client** out) {
  if (out == nullptr) return null_argument("dfl_client_new", "out");
  *out = nullptr;
  if (options == nullptr) return null_argument("dfl_client_new", "options");
  if (!options->options.resolver) {
    return fail(DFL_INVALID_ARGUMENT,
                "dfl_client_new: no URL template (dfl_options_set_url_template)");
  }
  return guarded("dfl_client_new", [&] {
    auto client = std::make_unique<dfl_client>();
    client->client = std::make_unique<Client>(options->options);
    *out = client.release();
    return DFL_OK;
  });
}

void dfl_client_free(dfl_client* client) { delete client; }

const char* dfl_pin_path(const dfl_pin* pin) { return pin == nullptr ? "" : pin->path.c_str(); }

void dfl_pin_release(dfl_pin* pin) { delete pin; }  // ~Pin releases it.

dfl_status dfl_subscribe(dfl_client* client, const dfl_artifact* artifact,
                         const dfl_demand_options* options, dfl_terminal_fn on_terminal,
                         void* user, dfl_demand* out) {
  if (client == nullptr) return null_argument("dfl_subscribe", "client");
  if (artifact == nullptr) return null_argument("dfl_subscribe", "artifact");
  if (artifact->resource == nullptr) return null_argument("dfl_subscribe", "artifact->resource");
  if (on_terminal == nullptr) return null_argument("dfl_subscribe", "on_terminal");
  return guarded("dfl_subscribe", [&] {
    dfl::backend::ArtifactRef ref;
    ref.key = dfl::ArtifactKey{artifact->resource,
                               artifact->revision != nullptr ? artifact->revision : "",
                               artifact->target != nullptr ? artifact->target : "",
                               artifact->generation};
    ref.origin = artifact->origin;
    ref.size_bytes = artifact->size_bytes;
    if (artifact->sha256_hex != nullptr) ref.sha256 = artifact->sha256_hex;
    dfl::DemandOptions o;
    if (options != nullptr) {
      o.owner = options->owner;
      o.owner_generation = options->owner_generation;
      o.priority = options->priority;
      if (options->timeout_s > 0) o.deadline_s = client->client->clock_s() + options->timeout_s;
    }
    // The terminal may come before subscribe returns (a cache hit): the
    // callback waits for its handle.
    auto handle = std::make_shared<std::promise<dfl::DemandHandle>>();
    std::shared_future<dfl::DemandHandle> known = handle->get_future().share();
    const dfl::DemandHandle h = client->client->subscribe(
        ref, o, [on_terminal, user, known](dfl::backend::DemandResult r) {
          dfl_result result{outcome_of(r.outcome), r.reason.c_str(), nullptr};
          if (r.pin) {
            result.pin = new dfl_pin{std::move(r.pin), {}};
            result.pin->path = result.pin->pin.path().string();
          }
          on_terminal(user, demand_of(known.get()), &result);
        });
    handle->set_value(h);
    if (out != nullptr) *out = demand_of(h);
    return DFL_OK;
  });
}

dfl_status dfl_cancel(dfl_client* client, dfl_demand demand) {
  if (client == nullptr) return null_argument("dfl_cancel", "client");
  return guarded("dfl_cancel", [&] {
    client->client->cancel(handle_of(demand));
    return DFL_OK;
  });
}

dfl_status dfl_set_priority(dfl_client* client, dfl_demand demand, int32_t priority) {
  if (client == nullptr) return null_argument("dfl_set_priority", "client");
  return guarded("dfl_set_priority", [&] {
    client->client->set_priority(handle_of(demand), priority);
    return DFL_OK;
  });
}

dfl_status dfl_end_owner(dfl_client* client, uint32_t owner) {
  if (client == nullptr) return null_argument("dfl_end_owner", "client");
  return guarded("dfl_end_owner", [&] {
    client->client->end_owner(owner);
    return DFL_OK;
  });
}

dfl_status dfl_progress_of(dfl_client* client, dfl_demand demand, dfl_progress* out) {
  if (client == nullptr) return null_argument("dfl_progress_of", "client");
  if (out == nullptr) return null_argument("dfl_progress_of", "out");
  return guarded("dfl_progress_of", [&] {
    const auto p = client->client->progress(handle_of(demand));
    if (!p) return fail(DFL_NOT_FOUND, "dfl_progress_of: the demand has ended");
    *out = dfl_progress{stage_of(p->stage), p->received, p->expected};
    return DFL_OK;
  });
}

dfl_status dfl_pause(dfl_client* client, int all, int32_t at_or_below) {
  if (client == nullptr) return null_argument("dfl_pause", "client");
  return guarded("dfl_pause", [&] {
    client->client->pause(all != 0 ? std::nullopt : std::optional<dfl::Priority>(at_or_below));
    return DFL_OK;
  });
}

dfl_status dfl_resume(dfl_client* client) {
  if (client == nullptr) return null_argument("dfl_resume", "client");
  return guarded("dfl_resume", [&] {
    client->client->resume();
    return DFL_OK;
  });
}

char* dfl_metrics_text(dfl_client* client) {
  if (client == nullptr) {
    null_argument("dfl_metrics_text", "client");
    return nullptr;
  }
  char* text = nullptr;
  guarded("dfl_metrics_text", [&] {
    std::ostringstream out;
    dfl::backend::write_prometheus(client->client->metrics(), out);
    const std::string s = out.str();
    text = static_cast<char*>(std::malloc(s.size() + 1));
    if (text == nullptr) throw std::bad_alloc();
    std::memcpy(text, s.c_str(), s.size() + 1);
    return DFL_OK;
  });
  return text;
}

void dfl_string_free(char* text) { std::free(text); }

}  // extern "C"
