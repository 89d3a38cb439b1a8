// demandflight: the command line.
//
//   demandflight sim TRACE [--model M] [--policy P] [--seed N] [--max-transfers N]
//                          [--out FILE] [--timeline FILE] [--decisions FILE]
//   demandflight validate TRACE
//   demandflight gen KIND --seed N [--demands N]
//   demandflight fetch --base-url URL --cache DIR MANIFEST    (cli/fetch.cpp)
//   demandflight replay TRACE --base-url URL --cache DIR [--speed X]   (cli/replay.cpp)
//   demandflight compare TRACE... [--models M,..] [--policies all|P,..] [--seeds N]  (cli/compare.cpp)
//   demandflight train TRACE... --out model.json [--horizon-s S]   (cli/train.cpp)
//   demandflight import csv LOG... --time C --key C --size C > trace.jsonl   (cli/import.cpp)
//   demandflight describe TRACE [--json FILE] [--top N]   (cli/describe.cpp)
//
// Exit codes: 0 success; 2 bad input (the trace, a flag), with a message naming
// the file, line and field; 1 anything else.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend_commands.h"
#include "demandflight/engine/config.h"
#include "demandflight/policies/registry.h"
#include "demandflight/format/defaults.h"
#include "demandflight/format/generator.h"
#include "demandflight/format/resample.h"
#include "demandflight/sim/oracle.h"
#include "demandflight/sim/simulator.h"
#include "demandflight/format/trace.h"
#include "progress.h"
#include "subcommand.h"

namespace {

using namespace dfl;
using namespace dfl::sim;
using namespace dfl::format;

// SimGrid 3.32's ns-3 glue aborts the process when a flow's connection closes
// before all its bytes went out (docs/cli.md, *Network model*). An ns3 run
// therefore goes on in a child process whose stderr is kept: this parent waits
// for it and returns true with its exit code, and says in one line what
// happened if SimGrid aborted it; the child gets false and carries on.
bool ns3_run_in_child(int& exit_code) {
  char path[] = "/tmp/demandflight-ns3-XXXXXX";
  const int kept = ::mkstemp(path);
  if (kept < 0) return false;  // No temporary file: run here, unguarded.
  ::unlink(path);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(kept);
    return false;
  }
  if (pid == 0) {
    ::dup2(kept, STDERR_FILENO);
    ::close(kept);
    return false;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string err;
  char buffer[4096];
  ::lseek(kept, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(kept, buffer, sizeof buffer)) > 0;) err.append(buffer, n);
  ::close(kept);
  if (WIFEXITED(status)) {
    std::fputs(err.c_str(), stderr);
    exit_code = WEXITSTATUS(status);
    return true;
  }
  // SimGrid's message: "[TIME] FILE:LINE: [root/CRITICAL] TEXT", then a backtrace.
  std::string what = "it stopped (signal " + std::to_string(WTERMSIG(status)) + ")";
  if (const auto at = err.find("/CRITICAL] "); at != std::string::npos) {
    const auto begin = at + 11;
    what = err.substr(begin, err.find('\n', begin) - begin);
    const auto line = err.rfind('\n', at);
    const auto line_begin = line == std::string::npos ? 0 : line + 1;
    if (err[line_begin] == '[') {
      const auto time_end = err.find(']', line_begin);
      what += " at simulated time " + err.substr(line_begin + 1, time_end - line_begin - 1) + " s";
    }
  }
  std::fprintf(stderr,
               "demandflight sim: the ns3 network model failed inside SimGrid's ns-3 glue: %s "
               "(a known limit of SimGrid 3.32; docs/cli.md, Network model)\n",
               what.c_str());
  exit_code = 1;
  return true;
}

// What a phase of `sim --profile` cost in memory.
struct Usage {
  long minor_faults = 0;
  long peak_rss_mb = 0;
};

Usage usage() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return Usage{u.ru_minflt, u.ru_maxrss / 1024};
}

// sim --stream: the trace read as the simulation reaches it, the rows written
// as they end. Outputs are written to NAME.partial and renamed when the run
// is complete: a run stopped by a bad line leaves nothing behind.
int run_streamed(const std::string& trace_path, const SimOptions& options,
                 std::string out_path, std::string demands_csv, std::string tasks_csv,
                 bool quiet, bool profile, const std::string& progress) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  std::vector<std::string> partials;
  auto partial = [&](std::string& path) {
    std::error_code ec;
    if (path.empty() || (std::filesystem::exists(path, ec) &&
                         !std::filesystem::is_regular_file(path, ec))) {
      return path;  // /dev/null, a pipe: written as it goes.
    }
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec))) {
      path = std::filesystem::canonical(path).string();  // Replace the file, not the link.
    }
    partials.push_back(path);
    return path + ".partial";
  };
  auto remove_partials = [&] {
    for (const std::string& path : partials)
      std::remove((path + ".partial").c_str());
  };
  try {
    TraceStream stream(trace_path);
    const Trace& trace = stream.trace();
    Result head;
    head.trace_name = trace.name;
    head.model = std::string(to_string(options.model));
    head.policy = options.policy;
    head.seed = options.seed.value_or(trace.seed);
    // The sinks: the result JSON and the CSV files, in one.
    struct Sinks final : RowSink {
      std::unique_ptr<ResultJsonWriter> json;
      std::unique_ptr<CsvRowWriter> csv;
      void demand(const DemandResult& d, std::string_view id) override {
        if (json) json->demand(d, id);
        if (csv) csv->demand(d, id);
      }
      void task(const TaskResult& t) override {
        if (json) json->task(t);
        if (csv) csv->task(t);
      }
    } sinks;
    std::ofstream out;
    if (!out_path.empty()) {
      out.open(partial(out_path));
      if (!out) {
        std::fprintf(stderr, "demandflight sim: cannot write %s\n", out_path.c_str());
        return 1;
      }
      sinks.json = std::make_unique<ResultJsonWriter>(out, head, trace);
    }
    if (!demands_csv.empty() || !tasks_csv.empty()) {
      sinks.csv = std::make_unique<CsvRowWriter>(partial(demands_csv), partial(tasks_csv), trace,
                                                 options.policy);
    }
    cli::ProgressLine line("sim", progress, quiet);
    SimOptions with_progress = options;
    if (line.active()) {
      with_progress.progress = [&](double now_s, std::uint64_t records) {
        char text[160];
        std::snprintf(text, sizeof text, "%s records read, simulated %.0f s",
                      cli::with_commas(records).c_str(), now_s);
        line.update(text);
      };
    }
    const Result result = cli::simulate_streamed(stream, with_progress, sinks);
    line.done();
    for (const std::string& warning : result.warnings)
      std::fprintf(stderr, "demandflight sim: warning: %s\n", warning.c_str());
    if (sinks.json) {
      sinks.json->finish(result);
      out.close();
      if (!out) throw std::runtime_error("writing " + out_path + " failed");
    }
    if (sinks.csv) sinks.csv->finish();
    for (const std::string& path : partials) {
      if (std::rename((path + ".partial").c_str(), path.c_str()) != 0)
        throw std::runtime_error("cannot rename " + path + ".partial to " + path);
    }
    if (!quiet) print_summary(result, trace, "simulated", stdout);
    if (profile) {
      std::fprintf(stderr,
                   "profile: streamed %llu records in %.3f s (peak RSS %ld MB)\n",
                   static_cast<unsigned long long>(stream.records_read()),
                   std::chrono::duration<double>(clock::now() - t_start).count(),
                   usage().peak_rss_mb);
    }
    return 0;
  } catch (const TraceError& e) {
    remove_partials();
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    remove_partials();
    std::fprintf(stderr, "demandflight sim: %s\n", e.what());
    return 1;
  }
}

// sim's command line, as CLI11 fills it.
struct SimArgs {
  std::string trace_path, out_path, timeline_path, transfer_log_path, model_name = "demand";
  std::string network, server_cc, tcp_sharing, resample_name = "none";
  std::string demands_csv, tasks_csv, progress = "auto";
  SimOptions options;
  std::uint64_t seed = 0;
  std::uint32_t max_transfers = 0, max_per_origin = 0;
  bool quiet = false, stream = false, profile = false;
  CLI::Option* seed_option = nullptr;
  CLI::Option* transfers_option = nullptr;
  CLI::Option* per_origin_option = nullptr;
};

const auto kLimit = CLI::Range(1u, format::defaults::max_transfers_limit);

// What sim simulates: the trace, the model, the policy and the network.
void add_sim_run_options(CLI::App& sim, SimArgs& a) {
  sim.add_option("TRACE", a.trace_path, "trace file (.jsonl)")->required();
  sim.add_option("--model", a.model_name, "demand | callbacks | independent")
      ->check(CLI::IsMember(model_names()))
      ->capture_default_str();
  std::string policies_help = "orphan policy NAME[:k=v,...]:";
  for (const auto& [name, what] : policies::list_orphan_policies())
    policies_help += "\n  " + name + ": " + what;
  sim.add_option("--policy", a.options.policy, policies_help)->capture_default_str();
  a.seed_option = sim.add_option("--seed", a.seed, "seed (default: the trace's)");
  a.transfers_option =
      sim.add_option("--max-transfers", a.max_transfers, "override scheduler.max_transfers")
          ->check(kLimit);
  a.per_origin_option =
      sim.add_option("--max-per-origin", a.max_per_origin, "override scheduler.max_per_origin")
          ->check(kLimit);
  sim.add_option("--network-model", a.network,
                 "default = tcp (calibrated + TCP state per kept-alive connection: handshakes, "
                 "slow start, its restart after idle) | calibrated (CM02 calibrated on the real "
                 "backend: a round trip per transfer, 95.6% of the link rate) | cm02 (exact: "
                 "size/bw + latency) | lv08 (SimGrid's own default) | ns3 (packet-level TCP, "
                 "slow); overrides platform.network_model")
      ->check(CLI::IsMember(format::network_model_names()));
  sim.add_option("--server-cc", a.server_cc,
                 "the origins' TCP congestion control, for the tcp model: cubic (an idle "
                 "connection restarts slow start) | bbr (it does not); overrides "
                 "platform.server_congestion_control")
      ->check(CLI::IsMember({"cubic", "bbr"}));
  sim.add_option("--tcp-sharing", a.tcp_sharing,
                 "how the tcp model shares a link among flows at different round trips: rtt "
                 "(the default: CM02's weights, in inverse proportion to the latency) | equal "
                 "(the same share each; the latency a delay before the bytes flow)")
      ->check(CLI::IsMember({"rtt", "equal"}));
  sim.add_option("--cfg", a.options.simgrid_config,
                 "a SimGrid setting KEY:VALUE applied after the model's (repeatable), e.g. "
                 "network/latency-factor:2")
      ->allow_extra_args(false);
  sim.add_option("--oracle-base", a.options.oracle_bases,
                 "with --policy oracle: a policy the oracle also starts from (repeatable; "
                 "every built-in policy with its defaults always is one)");
  sim.add_option("--resample", a.resample_name,
                 "none | owners: a bootstrap of the trace's owners drawn with the seed, so that "
                 "seeds vary the workload of a trace file (docs/cli.md)")
      ->check(CLI::IsMember({"none", "owners"}))
      ->capture_default_str();
  sim.add_flag("--finalize-execs", a.options.finalize_execs,
               "run every finalize stage as a SimGrid Exec (the same times, slower; for "
               "checking the simulator's own sharing of the CPU and the disk)");
  sim.add_flag("--stream", a.stream,
               "read the trace as the simulation reaches it and write each row as it ends, for "
               "traces too large to hold (memory follows what runs, not the trace's length; "
               "the same result; not with --timeline, --decisions, --resample, lookahead or "
               "oracle)");
}

// What sim writes, and what it says while it runs.
void add_sim_output_options(CLI::App& sim, SimArgs& a) {
  sim.add_option("--out", a.out_path, "write the result JSON here");
  sim.add_option("--timeline", a.timeline_path, "write a Chrome/Perfetto trace-event JSON here");
  sim.add_option("--transfer-log", a.transfer_log_path,
                 "write the network activities for bench/sim_bare_replay: a line per comm "
                 "started (T t id origin bytes) and cancelled (A t id); under the tcp model also "
                 "the connection each transfer takes (C t id origin connection new|kept "
                 "idle_s window_bytes delay_s artifact; delay_s is the handshake and slow start, and "
                 "under --tcp-sharing equal the origin's latency too)");
  sim.add_option("--decisions", a.options.decisions_path,
                 "write every orphan decision here, one JSON object per line: the view the "
                 "policy answered, its answer, and the key's next subscribe in the trace");
  sim.add_option("--decision-horizon", a.options.decision_horizon_s,
                 "seconds within which a key's next subscribe counts as came_back in "
                 "--decisions")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sim.add_option("--demands-csv", a.demands_csv,
                 "also write the demand rows as CSV here (gzip when it ends in .gz)");
  sim.add_option("--tasks-csv", a.tasks_csv,
                 "also write the task rows as CSV here (gzip when it ends in .gz)");
  sim.add_flag("--quiet", a.quiet, "print nothing on success");
  sim.add_option("--progress", a.progress,
                 "auto: a progress line on a terminal once the run has taken 2 s (not with "
                 "--quiet) | on: from the start, and a line every 10 s when stderr is not a "
                 "terminal | off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  sim.add_flag("--profile", a.profile,
               "print the wall time of each phase (read, simulate, write) to stderr");
}

// The command line into a.options; 0, or 2 after saying which policy is bad.
int settle_sim_options(SimArgs& a) {
  SimOptions& options = a.options;
  options.model = *parse_model(a.model_name);  // Checked by the option.
  if (*a.seed_option) options.seed = a.seed;
  if (*a.transfers_option) options.max_transfers = a.max_transfers;
  if (*a.per_origin_option) options.max_per_origin = a.max_per_origin;
  if (!a.network.empty()) {  // Otherwise platform.network_model decides.
    options.network_model = *format::parse_network_model(a.network);  // Checked by the option.
  }
  if (!a.server_cc.empty()) {
    options.server_congestion_control = *format::parse_server_congestion_control(a.server_cc);
  }
  if (!a.tcp_sharing.empty()) options.tcp_sharing = parse_tcp_sharing(a.tcp_sharing);
  options.timeline_path = a.timeline_path;
  options.transfer_log_path = a.transfer_log_path;
  try {
    check_sim_policy(options.policy);  // Refuse a bad policy before reading.
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "demandflight sim: --policy: %s\n", e.what());
    return 2;
  }
  for (const std::string& base : options.oracle_bases) {
    try {
      check_sim_policy(base);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "demandflight sim: --oracle-base: %s\n", e.what());
      return 2;
    }
  }
  return 0;
}

// `--progress`'s line, fed by the simulator (options.progress) while it is shown.
void show_progress(cli::ProgressLine& line, const Trace& trace, SimOptions& options) {
  if (!line.active()) return;
  const double end_s = trace.records.empty() ? 0.0 : trace.records.back().t;
  const std::string total = cli::with_commas(trace.records.size());
  options.progress = [&line, end_s, total](double now_s, std::uint64_t records) {
    char text[200];
    std::snprintf(text, sizeof text, "%s of %s records, simulated %.0f of %.0f s",
                  cli::with_commas(records).c_str(), total.c_str(), now_s, end_s);
    line.update(text);
  };
}

// sim with the whole trace in memory: read, simulate, write (each phase
// timed for --profile).
int simulate_whole(SimArgs& a) {
  using clock = std::chrono::steady_clock;
  const auto t_read = clock::now();
  Trace read = read_trace(a.trace_path);
  // The run's seed draws the resampling too: one seed, one replication.
  const std::uint64_t run_seed = a.options.seed.value_or(read.seed);
  const Trace trace = resample(std::move(read), parse_resample(a.resample_name), run_seed);
  // Opened (and an old result truncated) before the simulation, so that an
  // unwritable path fails at once; not part of the simulate phase's time.
  std::ofstream out;
  if (!a.out_path.empty()) {
    out.open(a.out_path);
    if (!out) {
      std::fprintf(stderr, "demandflight sim: cannot write %s\n", a.out_path.c_str());
      return 1;
    }
  }
  if (a.options.network_model.value_or(trace.platform.network_model) == NetworkModel::ns3) {
    if (int code = 0; ns3_run_in_child(code)) return code;
  }
  const auto t_simulate = clock::now();
  const Usage u_simulate = usage();
  cli::ProgressLine line("sim", a.progress, a.quiet);
  show_progress(line, trace, a.options);
  const Result result = cli::simulate(trace, a.options);
  a.options.progress = nullptr;
  line.done();
  for (const std::string& warning : result.warnings)
    std::fprintf(stderr, "demandflight sim: warning: %s\n", warning.c_str());
  const auto t_write = clock::now();
  const Usage u_write = usage();
  if (out.is_open()) {
    write_result_json(result, trace, out);
    out.close();
    if (!out) {
      std::fprintf(stderr, "demandflight sim: writing %s failed\n", a.out_path.c_str());
      return 1;
    }
  }
  write_rows_csv(result, trace, a.demands_csv, a.tasks_csv);
  if (!a.quiet) print_summary(result, trace, "simulated", stdout);
  if (a.profile) {
    auto s = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
    // Page faults: on a VM that returns free memory to its host, a first
    // touch of a page costs a host fault, so what a phase touches anew shows.
    std::fprintf(stderr,
                 "profile: read %.3f s, simulate %.3f s (%ld page faults, peak RSS %ld -> %ld "
                 "MB), write %.3f s\n",
                 s(t_read, t_simulate), s(t_simulate, t_write),
                 u_write.minor_faults - u_simulate.minor_faults, u_simulate.peak_rss_mb,
                 u_write.peak_rss_mb, s(t_write, clock::now()));
  }
  return 0;
}

int run_sim(SimArgs& a) {
  if (const int rc = settle_sim_options(a); rc != 0) return rc;
  cli::load_simulator();  // Before the clock: loading SimGrid is not simulating.
  if (!a.stream) return simulate_whole(a);
  if (!a.timeline_path.empty() || !a.options.decisions_path.empty() || a.resample_name != "none" ||
      !streamable_policy(a.options.policy)) {
    std::fprintf(stderr,
                 "demandflight sim: --stream: %s needs the whole trace in memory (run "
                 "without --stream)\n",
                 !a.timeline_path.empty()            ? "--timeline"
                 : !a.options.decisions_path.empty() ? "--decisions"
                 : a.resample_name != "none"         ? "--resample"
                                                     : ("--policy " + a.options.policy).c_str());
    return 2;
  }
  return run_streamed(a.trace_path, a.options, a.out_path, a.demands_csv, a.tasks_csv, a.quiet,
                      a.profile, a.progress);
}

cli::Subcommand add_sim_command(CLI::App& app) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* sim =
      app.add_subcommand("sim", "simulate a trace on SimGrid and write the result JSON");
  add_sim_run_options(*sim, *args);
  add_sim_output_options(*sim, *args);
  return {sim, [args] { return run_sim(*args); }};
}

cli::Subcommand add_validate_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* validate =
      app.add_subcommand("validate", "check a trace and say what is wrong with it");
  validate->add_option("TRACE", *path, "trace file (.jsonl)")->required();
  return {validate, [path] {
            const Trace trace = read_trace(*path);
            std::size_t subscribes = 0;
            for (const Record& r : trace.records)
              subscribes += r.op == Op::subscribe;
            std::printf(
                "%s: ok: \"%s\", %zu artifacts, %zu origins, %zu records, %zu demands, %zu "
                "owners\n",
                path->c_str(), trace.name.c_str(), trace.artifacts.size(),
                trace.platform.origins.size(), trace.records.size(), subscribes,
                trace.owners.size());
            return 0;
          }};
}

cli::Subcommand add_gen_command(CLI::App& app) {
  struct GenArgs {
    std::string kind;
    GenOptions options;
    std::uint32_t max_transfers = 0;
    CLI::Option* transfers_option = nullptr;
  };
  auto a = std::make_shared<GenArgs>();
  CLI::App* gen = app.add_subcommand("gen", "write a generated trace of a bundled kind to stdout");
  std::string kinds_help;
  for (const auto& [name, what] : generator_kinds())
    kinds_help += "\n  " + name + ": " + what;
  gen->add_option("KIND", a->kind, "scenario kind:" + kinds_help)->required();
  gen->add_option("--seed", a->options.seed, "seed")->required();
  gen->add_option("--demands", a->options.demands, "number of demands (subscribes)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{100'000'000}))
      ->capture_default_str();
  a->transfers_option =
      gen->add_option("--max-transfers", a->max_transfers, "scheduler.max_transfers")
          ->check(kLimit);
  gen->add_flag("--mirrors", a->options.mirrors,
                "every artifact lists the kind's other origins as mirrors after its own");
  return {gen, [a] {
            if (*a->transfers_option) a->options.max_transfers = a->max_transfers;
            std::ios::sync_with_stdio(false);
            generate(a->kind, a->options, std::cout);
            std::cout.flush();
            return std::cout ? 0 : 1;
          }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"demandflight: many callers sharing one download"};
  app.require_subcommand(1);
  // In the order `demandflight --help` lists them; fetch and replay are the
  // production backend's.
  const std::vector<dfl::cli::Subcommand> commands = {
      add_sim_command(app),
      add_validate_command(app),
      add_gen_command(app),
      dfl::cli::add_fetch_command(app),
      dfl::cli::add_replay_command(app),
      dfl::cli::add_compare_command(app),
      dfl::cli::add_train_command(app),
      dfl::cli::add_import_command(app),
      dfl::cli::add_describe_command(app),
      dfl::cli::add_report_command(app),
      dfl::cli::add_fidelity_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    for (const dfl::cli::Subcommand& command : commands)
      if (*command.app) return command.run();
    return 2;  // require_subcommand(1): not reached.
  } catch (const TraceError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "demandflight: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demandflight: %s\n", e.what());
    return 1;
  }
}
