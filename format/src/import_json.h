// Streaming a large JSON document: the elements of chosen arrays, one at a
// time, with the line each begins on (nlohmann's SAX parser over the file, so
// a capture of any size is read in the memory of its largest element).
#pragma once

#include <cstddef>
#include <functional>
#include <istream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dfl::format::import_detail {

using json = nlohmann::json;

// Calls `each(target, element, line)` for every element of an array found at
// one of `targets` (a path of object keys from the root; {} is a root array).
// Throws TraceError(file, line, "-", ...) when the text is not JSON.
void stream_json_arrays(std::istream& in, const std::string& file,
                        const std::vector<std::vector<std::string>>& targets,
                        const std::function<void(std::size_t, json&&, std::size_t)>& each);

// A JSON value's path for error messages: `log.entries[7].response.status`.
std::string element_path(const std::string& array_path, std::size_t index,
                         const std::string& field);

}  // namespace dfl::format::import_detail
