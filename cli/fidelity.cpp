// `demandflight fidelity RECORDING`: how far the simulation of a recorded run
// is from the run itself. The recording (`fetch` or `replay --record FILE
// --record-outcomes`, or ClientOptions::record with outcomes) is simulated
// with the model and orphan policy it was recorded under (or those given),
// on the platform its header measured, in a child process (one SimGrid
// engine per process); its demands and tasks are then set beside the rows
// of what happened (FILE's stem .demands.csv and .tasks.csv): outcomes
// identical, the median and p95 latency of the demands that succeeded in
// both, and the rate of each transfer that was installed after one attempt
// in both (the measures of bench/fidelity.py). A rotated recording is
// simulated whole, its parts joined.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "demandflight/backend/client.h"
#include "demandflight/format/trace.h"
#include "processes.h"
#include "subcommand.h"

extern char** environ;

namespace dfl::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A demand shorter than this waited for no transfer (a cache hit, a refusal):
// its latency says nothing of the network model (bench/fidelity.py's bound).
constexpr double kWaitedS = 0.005;

struct FidelityArgs {
  std::string recording, policy, model, network_model, out;
};

// The rows of a CSV file with a header line (RFC 4180: quoted fields, "" in
// them), each as a map from the header's names.
std::vector<std::map<std::string, std::string>> read_rows(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(errno) +
                             " (record with --record-outcomes)");
  }
  std::vector<std::vector<std::string>> lines;
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (char c; in.get(c);) {
    if (quoted) {
      if (c == '"') {
        if (in.peek() == '"') {
          fields.back() += '"';
          in.get();
        } else {
          quoted = false;
        }
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      lines.push_back(std::move(fields));
      fields.assign(1, "");
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (lines.empty()) throw std::runtime_error(path.string() + ": no header line");
  std::vector<std::map<std::string, std::string>> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].size() != lines[0].size()) {
      throw std::runtime_error(path.string() + ":" + std::to_string(i + 1) + ": " +
                               std::to_string(lines[i].size()) + " fields, the header has " +
                               std::to_string(lines[0].size()));
    }
    std::map<std::string, std::string> row;
    for (std::size_t f = 0; f < lines[0].size(); ++f)
      row[lines[0][f]] = lines[i][f];
    rows.push_back(std::move(row));
  }
  return rows;
}

double number_of(const std::map<std::string, std::string>& row, const std::string& field,
                 const fs::path& path) {
  const std::string& text = row.at(field);
  try {
    return std::stod(text);
  } catch (const std::exception&) {
    throw std::runtime_error(path.string() + ": field " + field + ": not a number: '" + text + "'");
  }
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const auto low = static_cast<std::size_t>(std::floor(at));
  const std::size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (at - static_cast<double>(low));
}

// The model and policy the recording was made under (its x-recording).
json recording_header(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(errno));
  try {
    return json::parse(line);
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + ":1: not a recording's header: " + e.what());
  }
}

// A rotated recording's parts as one trace in `dir` (the first part's
// header, every part's records, an artifact that a later part declares again
// left out), and how many parts; the first part itself when it is alone.
std::pair<fs::path, std::uint32_t> whole_recording(const fs::path& first, const fs::path& dir) {
  if (!fs::exists(backend::record_part_path(first, 1))) return {first, 1};
  const fs::path out = dir / "recording.jsonl";
  std::vector<std::string> parts;
  for (std::uint32_t part = 0; part == 0 || fs::exists(backend::record_part_path(first, part));
       ++part) {
    parts.push_back(backend::record_part_path(first, part).string());
  }
  std::ofstream whole(out, std::ios::binary);
  format::merge_recording_parts(parts, whole);
  if (!whole.flush()) throw std::runtime_error("cannot write " + out.string());
  return {out, static_cast<std::uint32_t>(parts.size())};
}

// Runs `demandflight sim` on the recording in a child; its result.
json simulate(const FidelityArgs& args, const fs::path& recording, const std::string& model,
              const std::string& policy) {
  TempDir scratch("demandflight-fidelity");
  const fs::path out = scratch.path() / "result.json", err = scratch.path() / "stderr.txt";
  std::error_code ec;
  const std::string exe = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw std::runtime_error("cannot find this program (/proc/self/exe): " + ec.message());
  std::vector<std::string> words = {exe,      "sim",  recording.string(), "--model",
                                    model,    "--policy", policy,       "--out",
                                    out.string(), "--quiet"};
  if (!args.network_model.empty()) {
    words.push_back("--network-model");
    words.push_back(args.network_model);
  }
  std::vector<char*> argv;
  for (std::string& w : words)
    argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("cannot run " + exe + ": " + std::strerror(spawned));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream text(err);
    const std::string why((std::istreambuf_iterator<char>(text)), {});
    throw std::runtime_error("the simulation of " + args.recording + " failed:\n" + why);
  }
  std::ifstream in(out);
  return json::parse(in);
}

// A CSV file's rows, as read_rows() reads them.
using Rows = std::vector<std::map<std::string, std::string>>;

// What the simulation is beside the recording's rows: the demands' outcomes
// and latencies, and the rates of transfers installed after one attempt.
struct Comparison {
  std::size_t compared = 0, same = 0;
  std::vector<std::string> differ;  // The first few that differ.
  std::vector<double> real_latency, sim_latency, latency_log;
  std::vector<double> rate_log;
};

// Outcomes, demand by demand, and the latencies of those that succeeded in
// both after waiting.
void compare_demands(const json& sim, const Rows& real_demands, const fs::path& demands_path,
                     Comparison& found) {
  std::map<std::string, const json*> simulated;
  for (const json& d : sim["demands"])
    simulated[d["demand"].get<std::string>()] = &d;
  for (const auto& row : real_demands) {
    auto it = simulated.find(row.at("demand"));
    if (it == simulated.end()) continue;  // Subscribed after the recording ended.
    ++found.compared;
    const std::string sim_outcome = (*it->second)["outcome"];
    if (sim_outcome == row.at("outcome")) {
      ++found.same;
    } else if (found.differ.size() < 5) {
      found.differ.push_back(row.at("demand") + " " + row.at("outcome") + " -> " + sim_outcome);
    }
    const double real = number_of(row, "latency_s", demands_path);
    const double simulated_s = (*it->second)["latency_s"];
    if (row.at("outcome") == "succeeded" && sim_outcome == "succeeded" && real >= kWaitedS &&
        simulated_s >= kWaitedS) {
      found.real_latency.push_back(real);
      found.sim_latency.push_back(simulated_s);
      found.latency_log.push_back(std::abs(std::log(simulated_s / real)));
    }
  }
}

// Transfer rates: a key's tasks in order in both worlds, installed after one attempt.
void compare_rates(const json& sim, const Rows& real_tasks, const fs::path& tasks_path,
                   Comparison& found) {
  std::map<std::string, std::vector<const json*>> sim_tasks;
  for (const json& t : sim["tasks"])
    sim_tasks[t["artifact"].get<std::string>()].push_back(&t);
  std::map<std::string, std::size_t> seen;
  std::vector<std::map<std::string, std::string>> ordered = real_tasks;
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
    return number_of(a, "t_start", tasks_path) < number_of(b, "t_start", tasks_path);
  });
  for (const auto& row : ordered) {
    const std::string& artifact = row.at("artifact");
    const std::size_t index = seen[artifact]++;
    auto it = sim_tasks.find(artifact);
    if (it == sim_tasks.end() || index >= it->second.size()) continue;
    const json& s = *it->second[index];
    if (row.at("outcome") != "installed" || s["outcome"] != "installed" || row.at("attempts") != "1" ||
        s["attempts"] != 1 || row.at("t_first_start").empty() || row.at("t_received").empty() ||
        s["t_first_start"].is_null() || s["t_received"].is_null()) {
      continue;
    }
    const double real_s = number_of(row, "t_received", tasks_path) -
                          number_of(row, "t_first_start", tasks_path);
    const double sim_s = s["t_received"].get<double>() - s["t_first_start"].get<double>();
    const double real_bytes = number_of(row, "bytes_transferred", tasks_path);
    const double sim_bytes = s["bytes_transferred"];
    if (real_s <= 0 || sim_s <= 0 || real_bytes <= 0 || sim_bytes <= 0) continue;
    found.rate_log.push_back(std::abs(std::log((sim_bytes / sim_s) / (real_bytes / real_s))));
  }
}

// The figures, as --out writes them.
json figures_of(const FidelityArgs& args, std::uint32_t parts, const std::string& model,
                const std::string& policy, const Comparison& found) {
  return json{{"recording", args.recording},
              {"parts", parts},
              {"model", model},
              {"policy", policy},
              {"demands", found.compared},
              {"outcomes_identical", found.same},
              {"outcomes_differ", found.differ},
              {"latency_demands", found.real_latency.size()},
              {"real_p50_s", percentile(found.real_latency, 0.5)},
              {"sim_p50_s", percentile(found.sim_latency, 0.5)},
              {"real_p95_s", percentile(found.real_latency, 0.95)},
              {"sim_p95_s", percentile(found.sim_latency, 0.95)},
              {"latency_median_abs_ln", percentile(found.latency_log, 0.5)},
              {"rate_tasks", found.rate_log.size()},
              {"rate_median_abs_ln", percentile(found.rate_log, 0.5)}};
}

// The figures, for a reader, on stdout.
void print_figures(const FidelityArgs& args, std::uint32_t parts, const std::string& model,
                   const std::string& policy, const Comparison& found) {
  const std::size_t same = found.same, compared = found.compared;
  const std::vector<std::string>& differ = found.differ;
  const double real_p50 = percentile(found.real_latency, 0.5),
               sim_p50 = percentile(found.sim_latency, 0.5);
  const double real_p95 = percentile(found.real_latency, 0.95),
               sim_p95 = percentile(found.sim_latency, 0.95);
  std::string of_parts;
  if (parts > 1) {
    of_parts = " (";
    of_parts += std::to_string(parts);
    of_parts += " parts)";
  }
  std::printf("fidelity: %s%s simulated with --model %s --policy %s, beside what happened\n",
              args.recording.c_str(), of_parts.c_str(), model.c_str(), policy.c_str());
  std::printf("  outcomes identical  %zu of %zu (%.1f%%)", same, compared,
              compared ? 100.0 * static_cast<double>(same) / static_cast<double>(compared) : 100.0);
  for (const std::string& d : differ)
    std::printf("%s %s", d == differ.front() ? "; differ:" : ",", d.c_str());
  std::printf("\n");
  if (!found.real_latency.empty()) {
    std::printf("  latency (%zu demands that succeeded in both after waiting)  p50 real %.3f s, "
                "sim %.3f s (%+.1f%%); p95 real %.3f s, sim %.3f s (%+.1f%%); median |ln(sim/real)| "
                "%.3f\n",
                found.real_latency.size(), real_p50, sim_p50, 100 * (sim_p50 / real_p50 - 1),
                real_p95, sim_p95, 100 * (sim_p95 / real_p95 - 1),
                percentile(found.latency_log, 0.5));
  } else {
    std::printf("  latency  no demand succeeded in both after waiting\n");
  }
  if (!found.rate_log.empty()) {
    std::printf("  transfer rate (%zu tasks installed after one attempt in both)  median "
                "|ln(sim/real)| %.3f\n",
                found.rate_log.size(), percentile(found.rate_log, 0.5));
  } else {
    std::printf("  transfer rate  no task installed after one attempt in both\n");
  }
}

int run_fidelity(const FidelityArgs& args) {
  const fs::path recording = args.recording;
  const json header = recording_header(recording);
  const json x = header.value("x-recording", json::object());
  const std::string model = !args.model.empty() ? args.model : x.value("model", "demand");
  const std::string policy =
      !args.policy.empty() ? args.policy : x.value("orphan_policy", "always-abort");
  const fs::path demands_path = backend::record_outcome_path(recording, false);
  const fs::path tasks_path = backend::record_outcome_path(recording, true);
  const auto real_demands = read_rows(demands_path);
  const auto real_tasks = read_rows(tasks_path);
  TempDir scratch("demandflight-fidelity-parts");
  const auto [whole, parts] = whole_recording(recording, scratch.path());
  const json sim = simulate(args, whole, model, policy);

  Comparison found;
  compare_demands(sim, real_demands, demands_path, found);
  compare_rates(sim, real_tasks, tasks_path, found);

  const json figures = figures_of(args, parts, model, policy, found);
  print_figures(args, parts, model, policy, found);
  if (!args.out.empty()) {
    std::ofstream out(args.out);
    out << figures.dump(1) << "\n";
    if (!out.flush()) {
      std::fprintf(stderr, "demandflight fidelity: cannot write %s\n", args.out.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

Subcommand add_fidelity_command(CLI::App& app) {
  auto args = std::make_shared<FidelityArgs>();
  auto* c = app.add_subcommand(
      "fidelity",
      "simulate a recording (fetch/replay --record FILE --record-outcomes) and say how far the "
      "simulation is from what happened: outcomes, latency, transfer rates");
  c->add_option("RECORDING", args->recording, "the recording (.jsonl), its rows beside it")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("--policy", args->policy, "orphan policy (default: the recording's)");
  c->add_option("--model", args->model, "demand | callbacks | independent (default: the recording's)");
  c->add_option("--network-model", args->network_model,
                "the simulator's network model (default: the recording's platform's)");
  c->add_option("--out", args->out, "also write the figures as JSON here");
  return Subcommand{c, [args] { return run_fidelity(*args); }};
}

}  // namespace dfl::cli
