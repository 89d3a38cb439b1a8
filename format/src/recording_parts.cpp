// merge_recording_parts (trace.h): a rotated recording as one trace.
#include <simdjson.h>

#include <fstream>
#include <ostream>
#include <string>
#include <unordered_set>

#include "demandflight/format/trace.h"

namespace dfl::format {
namespace {

// The artifact id a line declares, or nullopt for any other line (and for
// text that is not a JSON object).
std::optional<std::string> declared_id(simdjson::ondemand::parser& parser,
                                       simdjson::padded_string& line) {
  simdjson::ondemand::document doc;
  if (parser.iterate(line).get(doc) != simdjson::SUCCESS) return std::nullopt;
  simdjson::ondemand::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return std::nullopt;
  std::string_view op, id;
  if (object.find_field_unordered("op").get_string().get(op) != simdjson::SUCCESS ||
      op != "artifact") {
    return std::nullopt;
  }
  if (object.find_field_unordered("id").get_string().get(id) != simdjson::SUCCESS)
    return std::nullopt;
  return std::string(id);
}

}  // namespace

void merge_recording_parts(const std::vector<std::string>& parts, std::ostream& out) {
  simdjson::ondemand::parser parser;
  std::unordered_set<std::string> declared;
  for (std::size_t index = 0; index < parts.size(); ++index) {
    const std::string& part = parts[index];
    std::ifstream in(part, std::ios::binary);
    if (!in) throw TraceError::unreadable(part);
    std::string line;
    if (!std::getline(in, line) || line.find_first_not_of(" \t\r") == std::string::npos)
      throw TraceError(part, 1, "-", "empty: not a part of a recording");
    if (index == 0) out << line << '\n';
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // A page's filler.
      simdjson::padded_string padded(line);
      if (const std::optional<std::string> id = declared_id(parser, padded)) {
        if (!declared.insert(*id).second) continue;
      }
      out << line << '\n';
    }
    if (in.bad()) throw TraceError::unreadable(part, "cannot read");
  }
}

}  // namespace dfl::format
