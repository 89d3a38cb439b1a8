#include "demandflight/format/result_rows.h"

#include <charconv>
#include <cmath>

namespace dfl::format {
namespace {

template <class Int>
void append_integer(std::string& out, Int value) {
  char text[24];
  out.append(text, std::to_chars(text, text + sizeof text, value).ptr);
}

void optional_number(std::string& out, const std::optional<double>& value) {
  out += ',';
  if (value) CsvRows::append_number(out, *value);
}

}  // namespace

void CsvRows::append_text(std::string& out, std::string_view value) {
  if (value.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += value;
    return;
  }
  out += '"';
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void CsvRows::append_number(std::string& out, double value) {
  if (!std::isfinite(value)) return;
  char text[32];
  out.append(text, std::to_chars(text, text + sizeof text, value).ptr);
}

void CsvRows::append(std::string& out, const DemandRowFields& row) {
  append_text(out, row.demand);
  out += ',';
  append_text(out, row.owner);
  out += ',';
  append_text(out, row.artifact);
  out += ',';
  append_integer(out, row.priority);
  out += ',';
  append_number(out, row.t_subscribe);
  optional_number(out, row.t_end);
  optional_number(out, row.latency_s);
  out += ',';
  if (row.outcome) append_text(out, *row.outcome);
  out += ',';
  if (row.task) append_integer(out, *row.task);
  out += ',';
  if (row.served_by) append_text(out, *row.served_by);
}

void CsvRows::append(std::string& out, const TaskRowFields& row) {
  append_integer(out, row.task);
  out += ',';
  append_text(out, row.artifact);
  out += ',';
  append_number(out, row.t_start);
  optional_number(out, row.t_first_start);
  optional_number(out, row.t_received);
  out += ',';
  append_number(out, row.t_end);
  out += ',';
  append_text(out, row.outcome);
  for (std::uint64_t n : {row.attempts, row.bytes_transferred, row.installs}) {
    out += ',';
    append_integer(out, n);
  }
  // The lists as JSON text, as in the result JSON.
  std::string list = "[";
  for (const auto& [at, priority] : row.priority_timeline) {
    if (list.size() > 1) list += ',';
    list += '[';
    append_number(list, at);
    list += ',';
    if (priority) {
      append_integer(list, *priority);
    } else {
      list += "null";
    }
    list += ']';
  }
  list += ']';
  out += ',';
  append_text(out, list);
  list = "[";
  for (const OrphanDecisionFields& o : row.orphan_decisions) {
    if (list.size() > 1) list += ',';
    list += "{\"t\":";
    append_number(list, o.t);
    list += ",\"decision\":\"";
    list += to_string(o.decision);
    list += "\",\"bytes_done\":";
    append_integer(list, o.bytes_done);
    list += '}';
  }
  list += ']';
  out += ',';
  append_text(out, list);
}

}  // namespace dfl::format
