// The simulator as a module of the CLI, loaded when a subcommand simulates.
//
// Linking SimGrid (and the ns-3 libraries it brings) costs every process
// time at start-up, which `fetch`, `replay`, `validate` and `gen` have no use
// for. So the `demandflight` executable does not link it: `sim` and `train`
// open libdemandflight_simgrid.so, next to the executable, on first use (what
// it buys: docs/benchmarks.md, *Mechanisms kept and removed*).
//
// This one file is both sides: compiled into the module (DFL_SIM_MODULE_ENTRY)
// it is the entry point; into the CLI, the loader. The two pass C++ types, so
// the module answers only a CLI of its own build tree: both carry the tree's
// random id (DFL_BUILD_ID, sim/CMakeLists.txt) and a mismatch is refused.
#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "demandflight/sim/simulator.h"
#include "subcommand.h"

namespace {
using SimulateFn = dfl::format::Result (*)(const dfl::format::Trace&, const dfl::sim::SimOptions&);
using SimulateStreamedFn = dfl::format::Result (*)(dfl::format::TraceStream&,
                                                   const dfl::sim::SimOptions&,
                                                   dfl::format::RowSink&);
// What the module offers.
struct Entries {
  SimulateFn simulate;
  SimulateStreamedFn simulate_streamed;
};
}  // namespace

#ifdef DFL_SIM_MODULE_ENTRY

// Null unless `build_id` is this module's.
extern "C" __attribute__((visibility("default"))) const Entries* dfl_sim_simulate(
    const char* build_id) {
  static const Entries entries{&dfl::sim::simulate, &dfl::sim::simulate_streamed};
  return std::strcmp(build_id, DFL_BUILD_ID) == 0 ? &entries : nullptr;
}

#else

namespace dfl::cli {

namespace {

const Entries& entries() {
  static const Entries* fn = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot find this program (/proc/self/exe): " + ec.message());
    const std::string module = (exe.parent_path() / "libdemandflight_simgrid.so").string();
    sim::prepare_ns3_environment();  // Before ns-3 is loaded with the module.
    void* handle = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      throw std::runtime_error("cannot load the simulator (" + module + "): " + ::dlerror());
    }
    void* entry = ::dlsym(handle, "dfl_sim_simulate");
    if (entry == nullptr) throw std::runtime_error(module + " has no dfl_sim_simulate");
    const Entries* found =
        reinterpret_cast<const Entries* (*)(const char*)>(entry)(DFL_BUILD_ID);
    if (found == nullptr) {
      throw std::runtime_error(module + " is from another build of demandflight (reinstall both)");
    }
    return found;
  }();
  return *fn;
}

}  // namespace

void load_simulator() { entries(); }

format::Result simulate(const format::Trace& trace, const sim::SimOptions& options) {
  return entries().simulate(trace, options);
}

format::Result simulate_streamed(format::TraceStream& stream, const sim::SimOptions& options,
                                 format::RowSink& rows) {
  return entries().simulate_streamed(stream, options, rows);
}

}  // namespace dfl::cli

#endif
