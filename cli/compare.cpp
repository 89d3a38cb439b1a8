// demandflight compare TRACE... [--models M,...] [--policies all|P,...] [--seeds N]
//                      [--jobs N] [--weights k=v,...] [--csv FILE] [--markdown FILE]
//
// Runs every (trace, model, policy, seed) in its own `demandflight sim`
// process (SimGrid allows one engine per process), a few at a time, and
// prints one row per (trace, model, policy): the mean over seeds, with the
// spread (sample standard deviation) of the main figures. The oracle always
// runs, so that every row has its regret: score minus the oracle's score on
// the same trace, model and seed.
//
// A TRACE is a file, or `gen:KIND[:demands=N]`: the bundled generator's KIND
// written afresh for each seed, so that seeds vary the workload itself. For a
// file the seed varies only the retry jitter.
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "demandflight/engine/config.h"
#include "demandflight/policies/registry.h"
#include "demandflight/format/generator.h"
#include "demandflight/format/paired.h"
#include "demandflight/sim/oracle.h"
#include "demandflight/format/trace.h"
#include "demandflight/format/score.h"
#include "processes.h"
#include "progress.h"
#include "subcommand.h"

extern char** environ;

namespace dfl::cli {
namespace {

namespace fs = std::filesystem;

using format::Metrics;
using format::Weights;

// --weights k=v,...: the cost score's weights (format/score.h).
Weights parse_weights(const std::string& text) {
  return format::weights_from_params(policies::parse_policy_spec("weights:" + text).params,
                                     "--weights");
}

// The table's columns: every figure of format::kMetricFields, with how it
// is shown.
struct Column {
  const char* name;
  double Metrics::*field;
  int precision;
  bool spread;  // Show mean±sd in the table.
};
constexpr int precision_of(std::string_view name) {
  if (name == "gb" || name == "wasted_gb" || name == "score" || name == "regret" ||
      name == "vs_oracle")
    return 3;
  if (name == "deadline_misses" || name == "cache_hits" || name == "unserved") return 1;
  if (name == "service_rate" || name == "critical_service_rate") return 3;
  if (name == "critical_priority") return 0;
  return 2;
}
constexpr bool spread_of(std::string_view name) {
  return name == "gb" || name == "wasted_gb" || name == "critical_p95_s" || name == "score" ||
         name == "regret" || name == "vs_oracle";
}
constexpr auto make_columns() {
  std::array<Column, std::size(format::kMetricFields)> columns{};
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const format::MetricField& f = format::kMetricFields[i];
    columns[i] = Column{f.name, f.field, precision_of(f.name), spread_of(f.name)};
  }
  return columns;
}
constexpr auto kColumns = make_columns();

struct Run {
  std::size_t trace = 0;  // Index into the trace arguments.
  std::string model, policy;
  std::string spec;                 // What runs: the policy, with the oracle's weights.
  std::vector<std::string> extra;   // More arguments (the oracle's bases).
  std::string program;              // Runs it instead of this program (--external).
  std::uint64_t seed = 0;
  fs::path trace_file, out, err;
  Metrics metrics;
};

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this program (/proc/self/exe): " + ec.message());
  return p.string();
}

pid_t spawn(const std::string& exe, const Run& run) {
  std::vector<std::string> args = {
      exe,      "sim",    run.trace_file.string(),  "--model", run.model,        "--policy",
      run.spec, "--seed", std::to_string(run.seed), "--out",   run.out.string(), "--quiet"};
  args.insert(args.end(), run.extra.begin(), run.extra.end());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, run.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(rc));
  return pid;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Row {
  std::size_t trace = 0;
  std::string model, policy;
  std::vector<Metrics> runs;  // In seed order.
  Metrics mean, sd;
  // Against the baseline's row of the same trace and model, seed by seed:
  // one per column (format/paired.h).
  std::array<format::Paired, std::size(format::kMetricFields)> paired{};
};

// The paired statistics of every column of `row` against `baseline`.
void pair_with(Row& row, const Row& baseline) {
  for (std::size_t i = 0; i < kColumns.size(); ++i) {
    std::vector<double> x, b;
    for (const Metrics& m : row.runs)
      x.push_back(m.*kColumns[i].field);
    for (const Metrics& m : baseline.runs)
      b.push_back(m.*kColumns[i].field);
    row.paired[i] = format::paired(x, b);
  }
}

constexpr std::size_t kScoreColumn = [] {
  for (std::size_t i = 0; i < std::size(format::kMetricFields); ++i)
    if (std::string_view(format::kMetricFields[i].name) == "score") return i;
  return std::size_t{0};
}();

void aggregate(Row& row) {
  const double n = static_cast<double>(row.runs.size());
  for (const Column& c : kColumns) {
    double sum = 0;
    for (const Metrics& m : row.runs)
      sum += m.*c.field;
    const double mean = sum / n;
    double sq = 0;
    for (const Metrics& m : row.runs)
      sq += (m.*c.field - mean) * (m.*c.field - mean);
    row.mean.*c.field = mean;
    row.sd.*c.field = n > 1 ? std::sqrt(sq / (n - 1)) : 0.0;
  }
}

std::string number(double v, int precision) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

// `text` broken into lines of at most `width` columns at spaces.
std::string wrapped(const std::string& text, std::size_t width) {
  std::string out, line;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(' ', at), text.size());
    const std::string word = text.substr(at, end - at);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    at = end + 1;
  }
  return out + line + "\n";
}

// A difference: at `precision` decimals, or in significant digits where
// those would show a nonzero difference as 0.
std::string difference(double v, int precision) {
  if (std::isnan(v)) return "-";
  if (v != 0 && std::abs(v) < 0.5 * std::pow(10.0, -precision)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%+.2e", v);
    return buf;
  }
  return number(v, precision);
}

// Every digit a figure needs to be read back (the CSV files).
std::string exact(double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

std::string cell(const Row& row, const Column& c, bool spread) {
  std::string text = number(row.mean.*c.field, c.precision);
  if (spread && c.spread && row.runs.size() > 1 && !std::isnan(row.sd.*c.field)) {
    text += "±" + number(row.sd.*c.field, c.precision);
  }
  return text;
}

class Compare {
 public:
  explicit Compare(CLI::App& app) {
    cmd_ = app.add_subcommand(
        "compare",
        "run every trace x model x orphan policy x seed in parallel processes and tabulate");
    cmd_->add_option("TRACE", traces_, "trace files, or gen:KIND[:demands=N] to generate per seed")
        ->required();
    cmd_->add_option("--models", models_, "comma-separated: demand,callbacks,independent")
        ->capture_default_str();
    cmd_->add_option("--policies", policies_,
                     "all, or comma-separated policy specs NAME[:k=v,...] (an item k=v is a "
                     "parameter of the policy before it); the oracle is always run")
        ->capture_default_str();
    cmd_->add_option("--external", externals_,
                     "NAME=PROGRAM: also compare policy NAME, run by PROGRAM with the arguments "
                     "of `demandflight sim` (sim TRACE --model M --policy NAME --seed S --out "
                     "FILE --quiet); not one of the oracle's bases (repeatable; Python's "
                     "compare() runs its policies so)");
    cmd_->add_option("--seeds", seeds_, "how many seeds")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    cmd_->add_option("--first-seed", first_seed_,
                     "seeds are FIRST..FIRST+N-1 (evaluate on other seeds than you trained on)")
        ->capture_default_str();
    cmd_->add_option("--jobs", jobs_, "simulations at once (default: the CPUs)")
        ->check(CLI::Range(1, 1024));
    cmd_->add_option("--weights", weights_,
                     "cost score weights k=v,...: gb=1 (per GB transferred), p95_critical_s=1, "
                     "unserved=0.1 (per demand failed or timed out), deadline_miss=0, "
                     "pollution_s=0.01, wasted_gb=0 (docs/cli.md says why)");
    cmd_->add_option("--critical-priority", critical_priority_,
                     "the critical class's priority (default: the highest in each trace)");
    cmd_->add_option("--baseline", baseline_,
                     "the policy every other is paired with, seed by seed: mean difference, 95% "
                     "interval (t), Wilcoxon p, wins (run with the others if not among them)")
        ->capture_default_str();
    cmd_->add_option("--csv", csv_,
                     "write one row per trace x model x policy (mean, sd, and the paired "
                     "statistics of every figure against the baseline)");
    cmd_->add_option("--runs-csv", runs_csv_,
                     "write the tidy long table: one row per trace x model x policy x seed, "
                     "every figure");
    cmd_->add_option("--markdown", markdown_, "write the table as Markdown");
    cmd_->add_flag("--wide", wide_,
                   "every figure in the printed table (mean±sd), as --csv has them; by default "
                   "a short table that fits 100 columns");
    cmd_->add_option("--resample", resample_,
                     "none | owners: each seed of a trace file runs a bootstrap of its owners "
                     "(sim --resample), so that replications vary the workload")
        ->check(CLI::IsMember({"none", "owners"}))
        ->capture_default_str();
    cmd_->add_option("--progress", progress_,
                     "auto: the runs done on a terminal once compare has taken 2 s | on: from "
                     "the start, and a line every 10 s when stderr is not a terminal | off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
  }

  Subcommand subcommand() {
    return {cmd_, [this] { return run(); }};
  }

 private:
  int run() {
    Weights weights = parse_weights(weights_);
    if (critical_priority_) weights.critical_priority = static_cast<double>(*critical_priority_);
    const std::vector<std::string> models = models_of();
    std::vector<std::string> policies = policies_of();
    add_externals(policies);
    settle_baseline(policies);
    std::vector<std::string> oracle_extra;
    const std::string oracle_spec = add_oracle(policies, weights, oracle_extra);

    const TempDir scratch("dfl-compare");
    tmp_ = scratch.path();
    std::vector<std::vector<fs::path>> files;
    std::vector<std::string> names;
    trace_files(files, names);
    std::vector<Run> runs = plan(models, policies, oracle_spec, oracle_extra, files);
    if (const int rc = execute(runs); rc != 0) return rc;
    for (const Run& r : runs) {
      if (!r.program.empty() && !fs::exists(r.out)) {
        throw std::runtime_error("--external: " + r.program + " wrote no result to " +
                                 r.out.string());
      }
    }
    const std::vector<Row> rows = rows_of(runs, weights);
    if (!runs_csv_.empty()) write_runs_csv(runs, names);
    print_table(rows, names, stdout);
    print_legends(weights);
    if (seeds_ > 1) warn_of_identical_seeds(rows, names);
    if (!csv_.empty()) write_csv(rows, names);
    if (!markdown_.empty()) write_markdown(rows, names);
    return 0;
  }

  std::vector<std::string> models_of() const {
    std::vector<std::string> models = split(models_);
    for (const std::string& m : models) {
      if (!parse_model(m)) {
        throw std::invalid_argument("--models: unknown model \"" + m +
                                    "\" (known: " + model_names_text() + ")");
      }
    }
    if (models.empty()) throw std::invalid_argument("--models: no model given");
    return models;
  }

  // --policies: the built-in policies compared ("all": those that need no
  // parameter), each checked.
  std::vector<std::string> policies_of() const {
    std::vector<std::string> policies;
    if (policies_ == "all") {
      for (const auto& [name, what] : policies::list_orphan_policies()) {
        try {
          sim::check_sim_policy(name);  // Those that need no parameter (not learned).
          policies.push_back(name);
        } catch (const std::invalid_argument&) {
        }
      }
    } else {
      std::vector<std::string> listed;
      try {
        listed = policies::split_policy_list(policies_);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--policies: ") + e.what());
      }
      for (const std::string& spec : listed) {
        try {
          sim::check_sim_policy(spec);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string("--policies: ") + e.what());
        }
        policies.push_back(spec);
      }
    }
    return policies;
  }

  // --external NAME=PROGRAM: policies that other programs run, compared after
  // the built-in ones.
  void add_externals(std::vector<std::string>& policies) {
    for (const std::string& e : externals_) {
      const std::size_t eq = e.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == e.size()) {
        throw std::invalid_argument("--external: \"" + e + "\" is not NAME=PROGRAM");
      }
      const std::string name = e.substr(0, eq);
      if (std::find(policies.begin(), policies.end(), name) != policies.end() ||
          name == "oracle" || program_of_.count(name) != 0) {
        throw std::invalid_argument("--external: a policy named \"" + name +
                                    "\" is compared already");
      }
      program_of_[name] = e.substr(eq + 1);
      if (::access(program_of_[name].c_str(), X_OK) != 0) {
        throw std::invalid_argument("--external: " + name + ": " + program_of_[name] +
                                    " is not an executable program");
      }
    }
  }

  // --baseline: checked, named, and compared too.
  void settle_baseline(std::vector<std::string>& policies) {
    std::replace(baseline_.begin(), baseline_.end(), ';', ',');
    try {
      if (!is_external(baseline_)) sim::check_sim_policy(baseline_);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--baseline: ") + e.what());
    }
    // The baseline's row: the oracle's is named "oracle" whatever its spec.
    baseline_row_ = policies::parse_policy_spec(baseline_).name == "oracle" ? "oracle" : baseline_;
    if (baseline_row_ != "oracle" && !is_external(baseline_) &&
        std::find(policies.begin(), policies.end(), baseline_) == policies.end()) {
      policies.insert(policies.begin(), baseline_);
    }
  }

  // The oracle runs once per trace, model and seed, with the comparison's
  // weights and every compared policy among its bases (sim/oracle.h): its
  // spec; `oracle_extra` gets its bases.
  std::string add_oracle(std::vector<std::string>& policies, const Weights& weights,
                         std::vector<std::string>& oracle_extra) const {
    policies.erase(std::remove_if(policies.begin(), policies.end(),
                                  [](const std::string& p) {
                                    return policies::parse_policy_spec(p).name == "oracle";
                                  }),
                   policies.end());
    for (const std::string& p : policies) {
      oracle_extra.push_back("--oracle-base");
      oracle_extra.push_back(p);
    }
    for (const std::string& e : externals_)  // In the order given.
      policies.push_back(e.substr(0, e.find('=')));
    std::string oracle_spec = "oracle:";
    for (const auto& [name, value] : format::weight_values(weights)) {
      char number[64];
      std::snprintf(number, sizeof number, "%.17g", value);
      oracle_spec += (oracle_spec.back() == ':' ? "" : ",") + name + "=" + number;
    }
    policies.push_back("oracle");
    return oracle_spec;
  }

  // The trace file of each (trace, seed), generated ones written now, and
  // each trace's name in the table.
  void trace_files(std::vector<std::vector<fs::path>>& files, std::vector<std::string>& names) {
    files.assign(traces_.size(), {});
    names.assign(traces_.size(), {});
    for (std::size_t i = 0; i < traces_.size(); ++i) {
      const std::string& t = traces_[i];
      for (int k = 0; k < seeds_; ++k) {
        if (t.rfind("gen:", 0) == 0) {
          files[i].push_back(generate(t, first_seed_ + static_cast<std::uint64_t>(k), i));
        } else {
          files[i].push_back(t);
        }
      }
      if (t.rfind("gen:", 0) != 0) format::read_trace(t);  // Bad input: exit 2 before any run.
      names[i] = t.rfind("gen:", 0) == 0 ? t : fs::path(t).stem().string();
    }
  }

  // Every run: each trace, model, policy and seed.
  std::vector<Run> plan(const std::vector<std::string>& models,
                        const std::vector<std::string>& policies, const std::string& oracle_spec,
                        const std::vector<std::string>& oracle_extra,
                        const std::vector<std::vector<fs::path>>& files) const {
    std::vector<Run> runs;
    for (std::size_t i = 0; i < traces_.size(); ++i)
      for (const std::string& model : models)
        for (const std::string& policy : policies)
          for (int k = 0; k < seeds_; ++k) {
            Run r;
            r.trace = i;
            r.model = model;
            r.policy = policy;
            r.spec = policy == "oracle" ? oracle_spec : policy;
            if (auto it = program_of_.find(policy); it != program_of_.end()) r.program = it->second;
            if (policy == "oracle") r.extra = oracle_extra;
            if (resample_ != "none" && traces_[i].rfind("gen:", 0) != 0) {
              r.extra.push_back("--resample");
              r.extra.push_back(resample_);
            }
            r.seed = first_seed_ + static_cast<std::uint64_t>(k);
            r.trace_file = files[i][static_cast<std::size_t>(k)];
            const std::string id = std::to_string(runs.size());
            r.out = tmp_ / ("run-" + id + ".json");
            r.err = tmp_ / ("run-" + id + ".err");
            runs.push_back(std::move(r));
          }
    return runs;
  }

  // The runs scored (with their regret against the oracle of the same trace,
  // model and seed), gathered into a row per trace, model and policy, each
  // paired with the baseline's row.
  std::vector<Row> rows_of(std::vector<Run>& runs, const Weights& weights) const {
    for (Run& r : runs)
      r.metrics = format::score_result_json(slurp(r.out), weights);
    // Regret against the oracle of the same trace, model and seed.
    std::map<std::tuple<std::size_t, std::string, std::uint64_t>, double> oracle;
    for (const Run& r : runs)
      if (r.policy == "oracle") oracle[{r.trace, r.model, r.seed}] = r.metrics.score;
    for (Run& r : runs)
      format::set_regret(r.metrics, oracle.at({r.trace, r.model, r.seed}));

    std::vector<Row> rows;
    for (const Run& r : runs) {
      auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& row) {
        return row.trace == r.trace && row.model == r.model && row.policy == r.policy;
      });
      if (it == rows.end()) {
        rows.push_back(Row{r.trace, r.model, r.policy, {}, {}, {}});
        it = rows.end() - 1;
      }
      it->runs.push_back(r.metrics);
    }
    for (Row& row : rows)
      aggregate(row);
    for (Row& row : rows) {
      auto base = std::find_if(rows.begin(), rows.end(), [&](const Row& b) {
        return b.trace == row.trace && b.model == row.model && b.policy == baseline_row_;
      });
      pair_with(row, *base);
    }
    return rows;
  }

  void print_legends(const Weights& weights) const {
    char legend[1024];
    std::snprintf(
        legend, sizeof legend,
        "score = %g*GB + %g*wasted GB + %g*critical p95 s + %g*unserved + %g*deadline misses + "
        "%g*pollution s; critical = %s; regret = score - oracle's (same trace, model, seed); "
        "%d seed%s%s.",
        weights.gb, weights.wasted_gb, weights.p95_critical_s, weights.unserved,
        weights.deadline_miss, weights.pollution_s,
        critical_priority_ ? ("priority " + std::to_string(*critical_priority_)).c_str()
                           : "the highest priority in each trace (column critical_priority)",
        seeds_, seeds_ == 1 ? "" : "s", seeds_ > 1 && wide_ ? ", mean±sd" : "");
    std::fputs(wrapped(legend, 100).c_str(), stdout);
    const std::string paired_legend =
        "vs " + baseline_row_ +
        ": the score's paired difference, mean [95% t interval] (* where it excludes 0; "
        "constant: every seed gave the same difference), " +
        (wide_ ? std::string("Wilcoxon signed-rank p, ") : std::string()) +
        "seeds where it scored lower" +
        (wide_ ? "." : "; crit_p95_s = critical p95 s, served = service rate; --wide or --csv "
                       "for every figure.");
    std::fputs(wrapped(paired_legend, 100).c_str(), stdout);
  }

  // Replications that cannot differ are said to be so, not shown as ±0.
  void warn_of_identical_seeds(const std::vector<Row>& rows,
                               const std::vector<std::string>& names) const {
    for (std::size_t t = 0; t < traces_.size(); ++t) {
      const bool identical = std::all_of(rows.begin(), rows.end(), [&](const Row& row) {
        if (row.trace != t) return true;
        // Identical runs: every figure equal on every seed (the mean of
        // equal values may round, so the spread is judged against it).
        return std::all_of(kColumns.begin(), kColumns.end(), [&](const Column& c) {
          const double sd = row.sd.*c.field;
          return !(sd > 1e-12 * std::max(1.0, std::abs(row.mean.*c.field)));
        });
      });
      if (!identical) continue;
      // A warning, on stderr: the table above it holds no replication.
      if (resample_ != "none" || traces_[t].rfind("gen:", 0) == 0) {
        std::fprintf(stderr,
                     "warning: %s: its %d seeds gave identical runs under every policy%s: "
                     "nothing in this workload varies from seed to seed (one owner cannot "
                     "be resampled), so its ± and intervals describe no replication\n",
                     names[t].c_str(), seeds_,
                     resample_ != "none" ? (" even with --resample " + resample_).c_str()
                                         : "");
      } else {
        std::fprintf(stderr,
                     "warning: %s: its %d seeds gave identical runs under every policy (a "
                     "trace file's seed varies only the retry jitter; --resample owners "
                     "varies its workload); its ± and intervals describe no replication\n",
                     names[t].c_str(), seeds_);
      }
    }
  }

  fs::path generate(const std::string& arg, std::uint64_t seed, std::size_t index) {
    const format::GenSpec spec = format::parse_gen_spec(arg);
    format::GenOptions options;
    options.seed = seed;
    if (spec.demands) options.demands = *spec.demands;
    const fs::path path =
        tmp_ / ("trace-" + std::to_string(index) + "-" + std::to_string(seed) + ".jsonl");
    std::ofstream out(path);
    format::generate(spec.kind, options, out);
    if (!out) throw std::runtime_error("cannot write " + path.string());
    return path;
  }

  // Runs them all, `jobs` at a time, with a progress line (--progress).
  int execute(std::vector<Run>& runs) {
    const std::string exe = self_exe();
    ProgressLine line("compare", progress_, false);
    std::size_t done = 0;
    std::vector<std::size_t> failed;
    auto show = [&] {
      line.update(with_commas(done) + " of " + with_commas(runs.size()) + " runs done");
    };
    show();
    run_processes(
        runs.size(), jobs_ > 0 ? jobs_ : default_jobs(),
        [&](std::size_t i) { return spawn(runs[i].program.empty() ? exe : runs[i].program, runs[i]); },
        [&](std::size_t i, int code) {
          if (code != 0) failed.push_back(i);
          ++done;
          show();
        });
    line.done();
    for (std::size_t i : failed) {
      const Run& r = runs[i];
      std::fprintf(stderr, "compare: %s --model %s --policy %s --seed %llu failed:\n%s",
                   r.trace_file.c_str(), r.model.c_str(), r.policy.c_str(),
                   static_cast<unsigned long long>(r.seed), slurp(r.err).c_str());
    }
    return failed.empty() ? 0 : 1;
  }

  // Where a figure is in kColumns.
  static std::size_t column(std::string_view name) {
    for (std::size_t i = 0; i < kColumns.size(); ++i)
      if (name == kColumns[i].name) return i;
    throw std::logic_error("no column " + std::string(name));
  }

  // The default table: per trace and model, a line per policy with what a
  // choice is made on, within 100 columns (policy names cut to 24).
  void print_short_table(const std::vector<Row>& rows, const std::vector<std::string>& names,
                         FILE* out) const {
    constexpr std::size_t kPolicyWidth = 24;
    const std::size_t vs_oracle = column("vs_oracle"), p95 = column("critical_p95_s"),
                      served = column("service_rate"), wasted = column("wasted_gb");
    std::vector<std::pair<std::size_t, std::string>> groups;  // (trace, model), in order.
    for (const Row& row : rows) {
      if (std::find(groups.begin(), groups.end(), std::make_pair(row.trace, row.model)) ==
          groups.end())
        groups.emplace_back(row.trace, row.model);
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& [trace, model] = groups[g];
      std::fprintf(out, "%s%s (model %s)\n", g == 0 ? "" : "\n", names[trace].c_str(),
                   model.c_str());
      std::vector<std::vector<std::string>> table = {
          {"policy", "d_score [95% t]", "wins", "vs_oracle", "crit_p95_s", "served", "wasted_gb"}};
      for (const Row& row : rows) {
        if (row.trace != trace || row.model != model) continue;
        std::string policy = row.policy;
        if (display_width(policy) > kPolicyWidth) policy = policy.substr(0, kPolicyWidth - 1) + "~";
        const std::vector<std::string> paired = paired_cells(row);
        table.push_back({policy,
                         row.policy == baseline_row_ ? "baseline" : paired[0] + " " + paired[1],
                         paired[3], cell(row, kColumns[vs_oracle], false),
                         cell(row, kColumns[p95], false), cell(row, kColumns[served], false),
                         cell(row, kColumns[wasted], false)});
      }
      print_aligned(table, 1, out);
    }
  }

  // Left-aligned text in the first `text_columns`, numbers right-aligned.
  static void print_aligned(const std::vector<std::vector<std::string>>& table,
                            std::size_t text_columns, FILE* out) {
    std::vector<std::size_t> width(table.front().size(), 0);
    for (const auto& line : table)
      for (std::size_t i = 0; i < line.size(); ++i)
        width[i] = std::max(width[i], display_width(line[i]));
    for (const auto& line : table) {
      std::string text;
      for (std::size_t i = 0; i < line.size(); ++i) {
        const std::size_t pad = width[i] - display_width(line[i]);
        text += i < text_columns ? line[i] + std::string(pad, ' ') : std::string(pad, ' ') + line[i];
        text += i + 1 < line.size() ? "  " : "";
      }
      std::fprintf(out, "%s\n", text.c_str());
    }
  }

  void print_table(const std::vector<Row>& rows, const std::vector<std::string>& names,
                   FILE* out) const {
    if (!wide_) {
      print_short_table(rows, names, out);
      return;
    }
    std::vector<std::vector<std::string>> table;
    std::vector<std::string> header = {"trace", "model", "policy"};
    for (const Column& c : kColumns)
      header.push_back(c.name);
    for (const char* h : {"d_score", "d_score_95ci", "p", "wins"})
      header.push_back(h);
    table.push_back(header);
    for (const Row& row : rows) {
      std::vector<std::string> line = {names[row.trace], row.model, row.policy};
      for (const Column& c : kColumns)
        line.push_back(cell(row, c, true));
      for (std::string& text : paired_cells(row))
        line.push_back(std::move(text));
      table.push_back(line);
    }
    print_aligned(table, 3, out);
  }

  // The score against the baseline: mean difference, interval (with the
  // marker), p, wins. The baseline's own row shows dashes.
  std::vector<std::string> paired_cells(const Row& row) const {
    const format::Paired& p = row.paired[kScoreColumn];
    if (row.policy == baseline_row_) return {"-", "-", "-", "-"};
    const int digits = kColumns[kScoreColumn].precision;
    // Differences the seeds did not vary get no interval: "constant".
    std::string interval = p.constant           ? std::string("constant")
                           : std::isnan(p.ci_low) ? std::string("-")
                                                  : "[" + difference(p.ci_low, digits) + ", " +
                                                        difference(p.ci_high, digits) + "]";
    if (p.significant) interval += "*";
    char pv[32];
    std::snprintf(pv, sizeof pv, "%.3g", p.p_wilcoxon);
    return {difference(p.mean, digits), interval, pv,
            std::to_string(p.wins) + "/" + std::to_string(p.n)};
  }

  // One row per trace x model x policy x seed, every figure (what pandas and
  // seaborn expect).
  void write_runs_csv(const std::vector<Run>& runs, const std::vector<std::string>& names) const {
    std::ofstream out(runs_csv_);
    out << "trace,model,policy,seed";
    for (const Column& c : kColumns)
      out << ',' << c.name;
    out << '\n';
    for (const Run& r : runs) {
      out << '"' << names[r.trace] << "\"," << r.model << ",\"" << r.policy << "\"," << r.seed;
      for (const Column& c : kColumns)
        out << ',' << number(r.metrics.*c.field, 9);
      out << '\n';
    }
    if (!out) throw std::runtime_error("cannot write " + runs_csv_);
  }

  // UTF-8 aware, for "±".
  static std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s)
      n += (c & 0xC0) != 0x80;
    return n;
  }

  void write_csv(const std::vector<Row>& rows, const std::vector<std::string>& names) const {
    std::ofstream out(csv_);
    out << "trace,model,policy,seeds";
    for (const Column& c : kColumns)
      out << ',' << c.name << ',' << c.name << "_sd";
    for (const Column& c : kColumns) {
      for (const char* suffix : {"_diff", "_diff_lo", "_diff_hi", "_p_t", "_p_wilcoxon"})
        out << ',' << c.name << suffix;
    }
    out << ",wins,losses,ties,significant,constant\n";
    for (const Row& row : rows) {
      out << '"' << names[row.trace] << "\"," << row.model << ",\"" << row.policy << "\","
          << row.runs.size();
      for (const Column& c : kColumns) {
        out << ',' << number(row.mean.*c.field, 9) << ',' << number(row.sd.*c.field, 9);
      }
      for (const format::Paired& p : row.paired) {
        out << ',' << exact(p.mean) << ',' << exact(p.ci_low) << ',' << exact(p.ci_high) << ','
            << exact(p.p_t) << ',' << exact(p.p_wilcoxon);
      }
      const format::Paired& score = row.paired[kScoreColumn];
      out << ',' << score.wins << ',' << score.losses << ',' << score.ties << ','
          << (score.significant ? 1 : 0) << ',' << (score.constant ? 1 : 0) << '\n';
    }
    if (!out) throw std::runtime_error("cannot write " + csv_);
  }

  void write_markdown(const std::vector<Row>& rows, const std::vector<std::string>& names) const {
    std::ofstream out(markdown_);
    out << "| trace | model | policy |";
    for (const Column& c : kColumns)
      out << ' ' << c.name << " |";
    out << " d_score | d_score_95ci | p | wins |";
    out << "\n|---|---|---|";
    for (std::size_t i = 0; i < std::size(kColumns) + 4; ++i)
      out << "---:|";
    out << '\n';
    for (const Row& row : rows) {
      out << "| " << names[row.trace] << " | " << row.model << " | " << row.policy << " |";
      for (const Column& c : kColumns)
        out << ' ' << cell(row, c, true) << " |";
      for (const std::string& text : paired_cells(row))
        out << ' ' << text << " |";
      out << '\n';
    }
    if (!out) throw std::runtime_error("cannot write " + markdown_);
  }

  CLI::App* cmd_ = nullptr;
  std::vector<std::string> traces_;
  std::string models_ = "demand";
  std::string policies_ = "all";
  int seeds_ = 1;
  std::uint64_t first_seed_ = 1;
  int jobs_ = 0;
  std::string weights_;
  std::string baseline_ = "always-abort";
  std::string baseline_row_;  // The baseline's row name (set by run()).
  std::optional<long long> critical_priority_;
  std::string runs_csv_;
  std::string csv_, markdown_;
  std::string resample_ = "none";
  bool wide_ = false;
  std::string progress_ = "auto";
  std::vector<std::string> externals_;               // --external NAME=PROGRAM.
  std::map<std::string, std::string> program_of_;    // Their programs, by name.
  bool is_external(const std::string& name) const { return program_of_.count(name) != 0; }
  fs::path tmp_;
};

}  // namespace

Subcommand add_compare_command(CLI::App& app) {
  static Compare compare(app);  // Lives as long as the app's parse.
  return compare.subcommand();
}

}  // namespace dfl::cli
