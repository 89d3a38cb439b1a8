// demandflight train TRACE... --out model.json [--horizon-s S] [--l2 X] [--model M] [--jobs N]
//
// Fits the `learned` orphan policy (policies/learned.h). Each trace is
// simulated (in a child process of its own: one SimGrid engine per process)
// under always-abort, and every orphaning becomes one example: the features of
// the view the policy would have seen, labelled by the trace's future: is the
// key subscribed again within the horizon? A logistic regression is fitted on
// all examples with Eigen and written as JSON.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "demandflight/engine/config.h"
#include "demandflight/policies/expected_value.h"
#include "demandflight/policies/learned.h"
#include "demandflight/sim/oracle.h"
#include "demandflight/sim/simulator.h"
#include "demandflight/format/trace.h"
#include "processes.h"
#include "subcommand.h"

namespace dfl::cli {
namespace {

namespace fs = std::filesystem;
using policies::Features;

// Decides always-abort and writes down, for each orphaning, the features and
// whether the key comes back within the horizon (read from the trace).
class ExampleRecorder final : public OrphanPolicy {
 public:
  ExampleRecorder(const format::Trace& trace, double horizon_s)
      : future_(trace),
        online_(policies::ExpectedValuePolicy::Params{horizon_s, 2, 1, false, 1u << 18}),
        horizon_s_(horizon_s) {}

  OrphanDecision decide(const OrphanView& view) override {
    if (view.first_decision && view.key != nullptr) {
      const double online = online_.reuse_probability(*view.key, &view);
      x.push_back(policies::learned_features(view, online, horizon_s_));
      const std::optional<double> next = future_.next_request_s(*view.key);
      y.push_back(next && *next - view.now_s <= horizon_s_);
      online_.decide(view);
    }
    return OrphanDecision::abort;
  }
  void observe_request(const ArtifactKey& key, double now_s) override {
    future_.observe_request(key, now_s);
    online_.observe_request(key, now_s);
  }
  std::string_view name() const override { return "always-abort"; }
  bool uses_key_history() const override { return true; }

  std::vector<Features> x;
  std::vector<bool> y;

 private:
  sim::LookaheadPolicy future_;
  policies::ExpectedValuePolicy online_;
  double horizon_s_;
};

// In the child: simulate, write "label f0 f1 ..." lines. Returns the exit code.
int collect(const std::string& trace_path, Model model, double horizon_s, const fs::path& out) {
  try {
    const format::Trace trace = format::read_trace(trace_path);
    auto recorder = std::make_shared<ExampleRecorder>(trace, horizon_s);
    sim::SimOptions options;
    options.model = model;
    options.policy_object = recorder;
    cli::simulate(trace, options);
    std::ofstream file(out);
    file.precision(17);
    for (std::size_t i = 0; i < recorder->x.size(); ++i) {
      file << (recorder->y[i] ? 1 : 0);
      for (double v : recorder->x[i])
        file << ' ' << v;
      file << '\n';
    }
    return file ? 0 : 1;
  } catch (const format::TraceError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demandflight train: %s: %s\n", trace_path.c_str(), e.what());
    return 1;
  }
}

class Train {
 public:
  explicit Train(CLI::App& app) {
    cmd_ = app.add_subcommand("train",
                              "fit the learned orphan policy on traces (logistic regression of "
                              "P(reuse within the horizon))");
    cmd_->add_option("TRACE", traces_, "training traces (.jsonl)")->required();
    cmd_->add_option("--out", out_, "write the model JSON here")->required();
    cmd_->add_option("--horizon-s", horizon_s_, "reuse within this many seconds is a positive")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd_->add_option("--l2", l2_, "L2 penalty per example on the standardised weights")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd_->add_option("--model", model_, "demand | callbacks | independent")
        ->check(CLI::IsMember(model_names()))
        ->capture_default_str();
    cmd_->add_option("--jobs", jobs_, "simulations at once (default: the CPUs)")
        ->check(CLI::Range(1, 1024));
  }

  Subcommand subcommand() {
    return {cmd_, [this] { return run(); }};
  }

 private:
  int run() {
    for (const std::string& t : traces_)
      format::read_trace(t);                      // Bad input: exit 2 before anything runs.
    const Model model = *parse_model(model_);  // Checked by the option.
    const TempDir scratch("dfl-train");
    const fs::path& tmp = scratch.path();
    int worst = 0;
    std::fflush(nullptr);  // Nothing buffered is written twice by the children.
    run_processes(
        traces_.size(), jobs_ > 0 ? jobs_ : default_jobs(),
        [&](std::size_t i) {
          const pid_t pid = ::fork();
          if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
          if (pid == 0) {  // The child: one simulation, then out without unwinding.
            const int rc =
                collect(traces_[i], model, horizon_s_, tmp / (std::to_string(i) + ".txt"));
            std::fflush(nullptr);
            ::_exit(rc);
          }
          return pid;
        },
        [&](std::size_t i, int code) {
          if (code == 0) return;
          std::fprintf(stderr, "demandflight train: %s: simulation failed\n", traces_[i].c_str());
          worst = std::max(worst, code);
        });
    if (worst != 0) return worst;

    std::vector<Features> x;
    std::vector<bool> y;
    for (std::size_t i = 0; i < traces_.size(); ++i) {
      std::ifstream in(tmp / (std::to_string(i) + ".txt"));
      int label = 0;
      while (in >> label) {
        Features f{};
        for (double& v : f)
          in >> v;
        x.push_back(f);
        y.push_back(label == 1);
      }
    }
    policies::LearnedModel m = policies::fit_logistic(x, y, horizon_s_, l2_);
    for (const std::string& t : traces_)
      m.trained_on.push_back(fs::path(t).filename().string());
    std::ofstream out(out_);
    out << m.to_json();
    if (!out) throw std::runtime_error("cannot write " + out_);

    // The base rate's log loss, to judge the fit by.
    const double rate = static_cast<double>(m.positives) / static_cast<double>(m.examples);
    const double base =
        rate <= 0 || rate >= 1 ? 0.0 : -(rate * std::log(rate) + (1 - rate) * std::log(1 - rate));
    std::printf("trained on %zu traces: %llu orphanings, %llu reused within %g s (%.1f%%)\n",
                traces_.size(), static_cast<unsigned long long>(m.examples),
                static_cast<unsigned long long>(m.positives), horizon_s_, 100 * rate);
    std::printf("log loss %.4f (the base rate alone: %.4f)\n", m.train_log_loss, base);
    for (std::size_t i = 0; i < policies::kLearnedFeatures; ++i) {
      std::printf("  %-17s %+.4f\n", std::string(policies::kFeatureNames[i]).c_str(), m.weights[i]);
    }
    std::printf("wrote %s: use --policy learned:model=%s\n", out_.c_str(), out_.c_str());
    return 0;
  }

  CLI::App* cmd_ = nullptr;
  std::vector<std::string> traces_;
  std::string out_;
  double horizon_s_ = 60;
  double l2_ = 1e-3;
  std::string model_ = "demand";
  int jobs_ = 0;
};

}  // namespace

Subcommand add_train_command(CLI::App& app) {
  static Train train(app);
  return train.subcommand();
}

}  // namespace dfl::cli
