#include "demandflight/engine/outcome.h"

#include "demandflight/engine/config.h"
#include "demandflight/engine/orphan_policy.h"
#include "engine_assert.h"

namespace dfl {

std::string_view to_string(DemandOutcome outcome) {
  switch (outcome) {
    case DemandOutcome::succeeded:
      return "succeeded";
    case DemandOutcome::failed:
      return "failed";
    case DemandOutcome::cancelled:
      return "cancelled";
    case DemandOutcome::timed_out:
      return "timed_out";
    case DemandOutcome::owner_ended:
      return "owner_ended";
  }
  DFL_UNREACHABLE();
}

std::string_view to_string(TaskOutcome outcome) {
  switch (outcome) {
    case TaskOutcome::installed:
      return "installed";
    case TaskOutcome::failed:
      return "failed";
    case TaskOutcome::dropped:
      return "dropped";
    case TaskOutcome::aborted:
      return "aborted";
  }
  DFL_UNREACHABLE();
}

std::string_view to_string(OrphanDecision decision) {
  switch (decision) {
    case OrphanDecision::abort:
      return "abort";
    case OrphanDecision::complete:
      return "complete";
    case OrphanDecision::keep_partial:
      return "keep_partial";
  }
  DFL_UNREACHABLE();
}

std::string_view to_string(TransferStatus status) {
  switch (status) {
    case TransferStatus::ok:
      return "ok";
    case TransferStatus::retryable_error:
      return "retryable_error";
    case TransferStatus::permanent_error:
      return "permanent_error";
  }
  DFL_UNREACHABLE();
}

std::string_view to_string(FinalizeStatus status) {
  switch (status) {
    case FinalizeStatus::installed:
      return "installed";
    case FinalizeStatus::verify_failed:
      return "verify_failed";
    case FinalizeStatus::error:
      return "error";
  }
  DFL_UNREACHABLE();
}

std::string_view to_string(Model model) {
  switch (model) {
    case Model::demand:
      return "demand";
    case Model::callbacks:
      return "callbacks";
    case Model::independent:
      return "independent";
  }
  DFL_UNREACHABLE();
}

std::optional<Model> parse_model(std::string_view name) {
  for (Model m : {Model::demand, Model::callbacks, Model::independent}) {
    if (to_string(m) == name) return m;
  }
  return std::nullopt;
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (Model m : {Model::demand, Model::callbacks, Model::independent})
      out.emplace_back(to_string(m));
    return out;
  }();
  return names;
}

std::string model_names_text() {
  std::string out;
  for (const std::string& name : model_names())
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace dfl
