// _core.TraceWriter: the trace format's one writer (format/trace_writer.h)
// for Python's TraceBuilder, and the names of the record kinds, fault kinds
// and outcomes as the format and the engine spell them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "demandflight/engine/outcome.h"
#include "demandflight/format/trace_writer.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace dfl::python {
namespace {

// The members of a dict argument (`platform`, `retry`, ...), taken by name:
// a member of the wrong type or one no field has is a ValueError naming
// ARGUMENT.MEMBER.
class Members {
 public:
  Members(const py::dict& dict, std::string argument)
      : dict_(dict), argument_(std::move(argument)) {}

  std::optional<double> number(const char* name) {
    const py::object v = take(name);
    if (v.is_none()) return std::nullopt;
    if (!py::isinstance<py::int_>(v) && !py::isinstance<py::float_>(v)) fail(name, "not a number");
    const double d = v.cast<double>();
    if (!std::isfinite(d)) fail(name, "not a finite number");
    return d;
  }
  std::optional<std::int64_t> integer(const char* name) {
    const py::object v = take(name);
    if (v.is_none()) return std::nullopt;
    if (py::isinstance<py::float_>(v)) {
      const double d = v.cast<double>();
      if (d != static_cast<double>(static_cast<std::int64_t>(d))) fail(name, "not an integer");
      return static_cast<std::int64_t>(d);
    }
    if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) fail(name, "not an integer");
    return v.cast<std::int64_t>();
  }
  std::optional<std::uint64_t> count(const char* name) {
    const std::optional<std::int64_t> v = integer(name);
    if (v && *v < 0) fail(name, "negative");
    return v ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*v)) : std::nullopt;
  }
  std::optional<std::string> text(const char* name) {
    const py::object v = take(name);
    if (v.is_none()) return std::nullopt;
    if (!py::isinstance<py::str>(v)) fail(name, "not a string");
    return v.cast<std::string>();
  }
  std::optional<bool> flag(const char* name) {
    const py::object v = take(name);
    if (v.is_none()) return std::nullopt;
    if (!py::isinstance<py::bool_>(v)) fail(name, "not a bool");
    return v.cast<bool>();
  }
  std::optional<py::dict> dict(const char* name) {
    const py::object v = take(name);
    if (v.is_none()) return std::nullopt;
    if (!py::isinstance<py::dict>(v)) fail(name, "not a dict");
    return v.cast<py::dict>();
  }
  std::string field(const char* name) const { return argument_ + "." + name; }
  // Every member was taken: none is unknown.
  void finish() const {
    for (const auto& [key, value] : dict_) {
      const std::string name = py::str(key);
      bool known = false;
      for (const std::string& t : taken_)
        known = known || t == name;
      if (!known) {
        std::string names;
        for (const std::string& t : taken_)
          names += (names.empty() ? "" : ", ") + t;
        throw py::value_error(argument_ + ": unknown field '" + name + "' (known: " + names + ")");
      }
    }
  }

 private:
  py::object take(const char* name) {
    taken_.emplace_back(name);
    return dict_.contains(name) ? py::reinterpret_borrow<py::object>(dict_[name]) : py::none();
  }
  [[noreturn]] void fail(const char* name, const char* what) const {
    throw py::value_error(field(name) + ": " + what);
  }
  py::dict dict_;
  std::string argument_;
  std::vector<std::string> taken_;
};

format::ThrottleCaps caps_of(Members& m) {
  format::ThrottleCaps caps;
  caps.background_at_or_below = m.integer("background_at_or_below");
  caps.background_Bps = m.number("background_Bps");
  caps.overall_Bps = m.number("overall_Bps");
  m.finish();
  return caps;
}

format::TraceHeader::Platform platform_of(const py::dict& dict) {
  Members m(dict, "platform");
  format::TraceHeader::Platform p;
  p.client_bandwidth_Bps = m.number("client_bandwidth_Bps");
  p.client_latency_s = m.number("client_latency_s");
  if (const std::optional<py::dict> origins = m.dict("origins")) {
    p.origins.emplace();
    for (const auto& [name, link] : *origins) {
      const std::string origin = py::str(name);
      if (!py::isinstance<py::dict>(link))
        throw py::value_error("origins." + origin + ": not a dict");
      Members o(link.cast<py::dict>(), "origins." + origin);
      p.origins->push_back(format::HeaderOrigin{origin, o.number("bandwidth_Bps"),
                                                o.number("latency_s")});
      o.finish();
    }
  }
  p.disk_write_Bps = m.number("disk_write_Bps");
  p.hash_Bps = m.number("hash_Bps");
  p.network_model = m.text("network_model");
  p.server_congestion_control = m.text("server_congestion_control");
  m.finish();
  return p;
}

format::TraceHeader::Scheduler scheduler_of(const py::dict& dict) {
  Members m(dict, "scheduler");
  format::TraceHeader::Scheduler s;
  s.max_transfers = m.count("max_transfers");
  s.max_per_origin = m.count("max_per_origin");
  s.cache_bytes = m.count("cache_bytes");
  if (const std::optional<py::dict> retry = m.dict("retry")) {
    Members r(*retry, "retry");
    s.retry = format::TraceHeader::Retry{r.count("max_attempts"), r.number("base_s"),
                                         r.number("cap_s"), r.number("jitter")};
    r.finish();
  }
  if (const std::optional<py::dict> breaker = m.dict("breaker")) {
    Members b(*breaker, "breaker");
    s.breaker = format::TraceHeader::Breaker{b.count("failures"), b.number("open_s")};
    b.finish();
  }
  if (const std::optional<py::dict> throttle = m.dict("throttle")) {
    Members c(*throttle, "throttle");
    s.throttle = caps_of(c);
  }
  m.finish();
  return s;
}

template <class Enum>
std::vector<std::string> names_of(std::initializer_list<Enum> values) {
  std::vector<std::string> names;
  for (Enum v : values)
    names.emplace_back(to_string(v));
  return names;
}

// The names of the record kinds, fault kinds, outcomes and statuses, as the
// format and the engine spell them.
void add_names(py::module_& m) {
  std::vector<std::string> kinds, faults;
  for (std::string_view k : format::record_kind_names())
    kinds.emplace_back(k);
  for (std::string_view k : format::fault_kind_names())
    faults.emplace_back(k);
  m.attr("RECORD_KINDS") = kinds;
  m.attr("FAULT_KINDS") = faults;
  m.attr("DEMAND_OUTCOMES") =
      names_of({DemandOutcome::succeeded, DemandOutcome::failed, DemandOutcome::cancelled,
                DemandOutcome::timed_out, DemandOutcome::owner_ended});
  m.attr("TASK_OUTCOMES") = names_of(
      {TaskOutcome::installed, TaskOutcome::failed, TaskOutcome::dropped, TaskOutcome::aborted});
  m.attr("TRANSFER_STATUSES") = names_of({TransferStatus::ok, TransferStatus::retryable_error,
                                          TransferStatus::permanent_error});
  m.attr("FINALIZE_STATUSES") = names_of(
      {FinalizeStatus::installed, FinalizeStatus::verify_failed, FinalizeStatus::error});
}

// The fault record's fields from Python's keywords.
format::FaultLine fault_line(double t, const std::string& kind, const py::dict& fields,
                             std::string& artifact, std::string& origin) {
  const std::optional<format::FaultKind> parsed = format::parse_fault_kind(kind);
  if (!parsed) {
    std::string known;
    for (std::string_view k : format::fault_kind_names())
      known += (known.empty() ? "" : ", ") + std::string(k);
    throw py::value_error("kind must be one of " + known + ", not '" + kind + "'");
  }
  Members f(fields, "fault");
  format::FaultLine line;
  line.t = t;
  line.kind = *parsed;
  artifact = f.text("artifact").value_or("");
  origin = f.text("origin").value_or("");
  line.artifact = artifact;
  line.origin = origin;
  line.count = f.count("count");
  line.after_fraction = f.number("after_fraction");
  line.retryable = f.flag("retryable");
  line.duration_s = f.number("duration_s");
  f.finish();
  return line;
}

}  // namespace

void add_trace_writer(py::module_& m) {
  add_names(m);
  using format::TraceWriter;
  py::class_<TraceWriter>(m, "TraceWriter",
                          "The trace format's writer (format/trace_writer.h): each call writes "
                          "one line; text() has them all.")
      .def(py::init<>())
      .def(
          "header",
          [](TraceWriter& w, const std::string& name, std::uint64_t seed, const py::dict& platform,
             const py::dict& scheduler,
             const std::vector<std::pair<std::string, std::string>>& extensions) {
            format::TraceHeader h;
            h.name = name;
            h.seed = seed;
            h.platform = platform_of(platform);
            h.scheduler = scheduler_of(scheduler);
            for (const auto& [key, text] : extensions) {
              if (key.rfind("x-", 0) != 0)
                throw py::value_error("extensions: '" + key + "' does not begin with x-");
            }
            h.extensions = extensions;
            w.header(h);
          },
          "name"_a, "seed"_a, "platform"_a, "scheduler"_a,
          "extensions"_a = std::vector<std::pair<std::string, std::string>>{})
      .def(
          "artifact",
          [](TraceWriter& w, const std::string& id, const std::string& resource,
             const std::string& revision, const std::string& target, std::int64_t generation,
             std::uint64_t size, const std::vector<std::string>& origins,
             std::optional<std::string> sha256) {
            if (origins.empty()) throw py::value_error("origins: empty");
            const std::vector<std::string_view> views(origins.begin(), origins.end());
            format::ArtifactLine a;
            a.id = id;
            a.resource = resource;
            a.revision = revision;
            a.target = target;
            a.generation = generation;
            a.size = size;
            a.origins = views;
            if (sha256) a.sha256 = *sha256;
            w.artifact(a);
          },
          "id"_a, "resource"_a, "revision"_a, "target"_a, "generation"_a, "size"_a, "origins"_a,
          "sha256"_a)
      .def(
          "subscribe",
          [](TraceWriter& w, double t, const std::string& demand, const std::string& owner,
             const std::string& artifact, std::int64_t priority,
             std::optional<std::int64_t> owner_generation, std::optional<double> timeout_s) {
            w.write(format::SubscribeLine{t, demand, owner, artifact, priority, owner_generation,
                                          timeout_s});
          },
          "t"_a, "demand"_a, "owner"_a, "artifact"_a, "priority"_a, "owner_generation"_a,
          "timeout_s"_a)
      .def(
          "cancel",
          [](TraceWriter& w, double t, const std::string& demand) {
            w.write(format::CancelLine{t, demand});
          },
          "t"_a, "demand"_a)
      .def(
          "set_priority",
          [](TraceWriter& w, double t, const std::string& demand, std::int64_t priority) {
            w.write(format::SetPriorityLine{t, demand, priority});
          },
          "t"_a, "demand"_a, "priority"_a)
      .def(
          "end_owner",
          [](TraceWriter& w, double t, const std::string& owner,
             std::optional<std::int64_t> owner_generation) {
            w.write(format::EndOwnerLine{t, owner, owner_generation});
          },
          "t"_a, "owner"_a, "owner_generation"_a)
      .def(
          "throttle",
          [](TraceWriter& w, double t, const py::dict& caps) {
            Members c(caps, "throttle");
            w.write(format::ThrottleLine{t, caps_of(c)});
          },
          "t"_a, "caps"_a)
      .def(
          "fault",
          [](TraceWriter& w, double t, const std::string& kind, const py::dict& fields) {
            std::string artifact, origin;
            w.write(fault_line(t, kind, fields, artifact, origin));
          },
          "t"_a, "kind"_a, "fields"_a)
      .def("text", &TraceWriter::text);
}

}  // namespace dfl::python
