#include "sim_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace dfl::cli {

namespace {

SimulateFn simulate_fn() {
  static SimulateFn fn = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot find this program (/proc/self/exe): " + ec.message());
    const std::string module = (exe.parent_path() / "libdemandflight_simgrid.so").string();
    void* handle = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      throw std::runtime_error("cannot load the simulator (" + module + "): " + ::dlerror());
    }
    void* entry = ::dlsym(handle, "dfl_sim_simulate");
    if (entry == nullptr) throw std::runtime_error(module + " has no dfl_sim_simulate");
    const SimulateFn found = reinterpret_cast<SimulateFn (*)(const char*)>(entry)(DFL_BUILD_ID);
    if (found == nullptr) {
      throw std::runtime_error(module + " is from another build of demandflight (reinstall both)");
    }
    return found;
  }();
  return fn;
}

}  // namespace

void load_simulator() { simulate_fn(); }

sim::Result simulate(const sim::Trace& trace, const sim::SimOptions& options) {
  return simulate_fn()(trace, options);
}

}  // namespace dfl::cli
