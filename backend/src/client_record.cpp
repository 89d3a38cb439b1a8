#include "client_record.h"

#include "demandflight/format/trace_writer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>
#include <algorithm>

namespace dfl::backend {
namespace {

using Json = nlohmann::ordered_json;

std::string dump(const Json& json) {
  // A name that is not UTF-8 cannot be a JSON string: its bad bytes become U+FFFD.
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}


// A letter and a number (built by appending: GCC 12's -Wrestrict misreads
// "literal" + std::to_string() at -O2).
std::string named(char letter, std::uint64_t number) {
  std::string out(1, letter);
  out += std::to_string(number);
  return out;
}


std::string owner_name(OwnerId owner) { return named('o', owner); }

std::string system_error(const char* what, const std::filesystem::path& path, int error) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(error);
}

int open_part(const std::filesystem::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

format::ThrottleCaps throttle_caps(const ThrottleConfig& c) {
  format::ThrottleCaps caps;
  if (c.background_at_or_below) caps.background_at_or_below = *c.background_at_or_below;
  if (c.background_Bps > 0) caps.background_Bps = c.background_Bps;
  if (c.overall_Bps > 0) caps.overall_Bps = c.overall_Bps;
  return caps;
}

format::TraceHeader::Scheduler scheduler_header(const SchedulerConfig& scheduler,
                                                const ThrottleConfig& throttle) {
  format::TraceHeader::Scheduler h;
  h.max_transfers = scheduler.max_transfers;
  h.max_per_origin = scheduler.max_per_origin;
  h.cache_bytes = scheduler.cache_bytes;
  h.retry = format::TraceHeader::Retry{scheduler.retry.max_attempts, scheduler.retry.base_s,
                                       scheduler.retry.cap_s, scheduler.retry.jitter};
  h.breaker = format::TraceHeader::Breaker{scheduler.breaker.failures, scheduler.breaker.open_s};
  h.throttle = throttle_caps(throttle);
  return h;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

double record_time(double t) { return std::round(t * 1e6) / 1e6; }

std::string record_demand_id(DemandHandle h) {
  std::string out = named('d', h.slot);
  out += 'g';
  out += std::to_string(h.generation);
  return out;
}

std::filesystem::path record_part_path(const std::filesystem::path& first, std::uint32_t part) {
  if (part == 0) return first;
  std::filesystem::path path = first;
  path.replace_filename(first.stem().string() + "." + std::to_string(part) +
                        first.extension().string());
  return path;
}

Recording::Recording(RecordOptions options, const SchedulerConfig& scheduler,
                     const ThrottleConfig& throttle, std::string_view orphan_policy,
                     std::function<MeasuredPlatform()> measure)
    : options_(std::move(options)),
      measure_(std::move(measure)),
      scheduler_(scheduler_header(scheduler, throttle)),
      recording_json_(dump(Json{{"started_utc", utc_now()},
                                {"clock", "seconds since the client was made"},
                                {"model", std::string(to_string(scheduler.model))},
                                {"orphan_policy", std::string(orphan_policy)},
                                {"hashed_names", !options_.hash_key.empty()}})) {
  if (options_.path.empty()) throw std::invalid_argument("ClientOptions.record.path is empty");
  if (options_.buffer_bytes == 0)
    throw std::invalid_argument("ClientOptions.record.buffer_bytes must be positive");
  fd_ = open_part(options_.path);
  if (fd_ < 0) throw std::runtime_error(system_error("cannot create", options_.path, errno));
  status_.parts = 1;
  std::string first = header(0, nullptr);
  part_bytes_ = first.size();
  status_.records = 1;
  pending_ = std::move(first);
  if (options_.outcomes) open_rows();
  writer_ = std::thread([this] { writer_loop(); });
}

Recording::~Recording() { close(nullptr); }

RecordStatus Recording::close(const MeasuredPlatform* measured) {
  if (writer_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_writer_.notify_one();
    writer_.join();
    if (fd_ >= 0 && ::close(fd_) != 0 && status_.error.empty())
      status_.error = system_error("cannot write", record_part_path(options_.path, file_part_), errno);
    fd_ = -1;
    for (Side& side : sides_) {
      if (side.fd >= 0 && ::close(side.fd) != 0 && status_.error.empty())
        status_.error = system_error("cannot write", side.path, errno);
      side.fd = -1;
    }
    // Each part's header, the same size as the one it replaces, now with
    // what was measured over the whole run.
    for (std::uint32_t part = 0; measured != nullptr && part <= file_part_; ++part) {
      const std::string head = header(part, measured);
      if (head.size() != kHeaderBytes) continue;  // Too long to hold it: kept as it was.
      const std::filesystem::path path = record_part_path(options_.path, part);
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::pwrite(fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size())) {
        std::lock_guard lock(mutex_);
        if (status_.error.empty()) status_.error = system_error("cannot write", path, errno);
      }
      if (fd >= 0) ::close(fd);
    }
  }
  return status();
}

namespace {

// The measured figures for the header: `x-measured` (each figure with its
// samples) and the `platform` derived from them, with the `keep` origins of
// the most samples.
std::pair<format::TraceHeader::Platform, Json> measured_json(
    const MeasuredPlatform& m, std::size_t keep,
    const std::function<std::string(OriginId)>& name) {
  std::vector<MeasuredPlatform::Origin> origins = m.origins;
  std::stable_sort(origins.begin(), origins.end(), [](const auto& a, const auto& b) {
    return a.rtt_samples + a.lone_samples > b.rtt_samples + b.lone_samples;
  });
  origins.resize(std::min(keep, origins.size()));
  Json x{{"estimators",
          "rtt_s: least TCP connect time of new connections; lone_Bps: of the complete "
          "attempts of 1 MiB or more with no other transfer in flight, the median link rate "
          "at which the tcp model's slow start takes those on new connections their time "
          "(lone_fit), else the best body rate; an origin's busiest_Bps: its transfers "
          "together over a window of 0.5 s or more; the platform's bandwidth_Bps: the larger; "
          "client "
          "busiest_Bps: all transfers over a window of 0.5 s or more; finalize Bps: bytes over "
          "the time a finalize ran (docs/backend.md)"}};
  format::TraceHeader::Platform platform;
  Json x_origins = Json::object();
  std::vector<format::HeaderOrigin> p_origins;
  bool any_rtt = false;
  double client_Bps = m.client_windows > 0 ? m.client_Bps : 0;
  for (const auto& o : origins) {
    x_origins[name(o.origin)] = Json{{"rtt_s", o.rtt_s},
                                     {"rtt_samples", o.rtt_samples},
                                     {"lone_Bps", o.lone_Bps},
                                     {"lone_samples", o.lone_samples},
                                     {"lone_fit", o.lone_fit},
                                     {"busiest_Bps", o.busiest_Bps},
                                     {"windows", o.windows}};
    format::HeaderOrigin p{name(o.origin), std::nullopt, std::nullopt};
    // The path: its lone figure, or what its transfers together reached, if
    // more (a lower bound).
    if ((o.lone_samples > 0 || o.windows > 0) && o.bandwidth_Bps() > 0) {
      p.bandwidth_Bps = o.bandwidth_Bps();
      client_Bps = std::max(client_Bps, o.bandwidth_Bps());  // The client link carried it.
    }
    if (o.rtt_samples > 0) {
      p.latency_s = o.rtt_s / 2;  // A round trip is 2 x (client's + origin's latency).
      any_rtt = true;
    }
    if (p.bandwidth_Bps || p.latency_s) p_origins.push_back(std::move(p));
  }
  x["origins"] = std::move(x_origins);
  x["client"] = Json{{"busiest_Bps", m.client_Bps}, {"windows", m.client_windows}};
  const double finalize_Bps =
      m.finalize_busy_s > 0 ? static_cast<double>(m.finalize_bytes) / m.finalize_busy_s : 0;
  x["finalize"] = Json{{"Bps", finalize_Bps},
                       {"bytes", m.finalize_bytes},
                       {"busy_s", m.finalize_busy_s},
                       {"count", m.finalizes}};
  // The client link: its busiest window, or the fastest origin's path if more
  // (a run too short for a window, one transfer at a time).
  if (client_Bps > 0) platform.client_bandwidth_Bps = client_Bps;
  if (any_rtt) platform.client_latency_s = 0.0;  // The origins' latencies hold it all.
  if (!p_origins.empty()) platform.origins = std::move(p_origins);
  if (finalize_Bps > 0) {
    // SHA-256 runs as the bytes arrive: the finalize's time is the install's.
    platform.disk_write_Bps = finalize_Bps;
    platform.hash_Bps = 1e12;
  }
  return {std::move(platform), std::move(x)};
}

}  // namespace

std::string Recording::header(std::uint32_t part, const MeasuredPlatform* measured) const {
  auto name = [this](OriginId o) { return origin_name(o); };
  const std::size_t origins = measured != nullptr ? measured->origins.size() : 0;
  for (std::size_t keep = origins;; --keep) {
    format::TraceHeader h;
    h.name = options_.name;
    h.seed = 1;
    h.scheduler = scheduler_;
    if (measured != nullptr) {
      auto [platform, x] = measured_json(*measured, keep, name);
      h.platform = std::move(platform);
      h.extensions.emplace_back("x-measured", dump(x));
    }
    // recording_json_ is an object: the part goes in before its closing brace.
    std::string recording = recording_json_.substr(0, recording_json_.size() - 1);
    recording += R"(,"part":)" + std::to_string(part) + "}";
    h.extensions.emplace_back("x-recording", std::move(recording));
    format::TraceWriter writer;
    writer.header(h);
    std::string line = writer.take();
    line.pop_back();  // Its newline.
    if (line.size() < kHeaderBytes) {
      // One page, whatever it holds: the close rewrites it in place.
      line.append(kHeaderBytes - 1 - line.size(), ' ');
      return line + "\n";
    }
    if (keep == 0) return line + "\n";
  }
}

std::string Recording::origin_name(OriginId o) const {
  if (o < options_.origin_names.size()) return options_.origin_names[o];
  std::string name = "origin";
  name += std::to_string(o);
  return name;
}

std::string Recording::resource_name(const std::string& resource) const {
  if (options_.hash_key.empty()) return resource;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), options_.hash_key.data(), static_cast<int>(options_.hash_key.size()),
       reinterpret_cast<const unsigned char*>(resource.data()), resource.size(), mac, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 16 && i < length; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

std::string Recording::subscribe(double t, DemandHandle demand, const ArtifactRef& artifact,
                                 const DemandOptions& options) {
  // The artifact as this caller names it: two callers that expect different
  // sizes or digests of one key are two ids of that key (docs/trace-format.md).
  const std::string resource = resource_name(artifact.key.resource);
  std::vector<std::string> origin_names{origin_name(artifact.origin)};
  for (OriginId m : artifact.mirrors)
    origin_names.push_back(origin_name(m));
  const std::vector<std::string_view> origins(origin_names.begin(), origin_names.end());
  format::ArtifactLine a;
  a.resource = resource;
  a.revision = artifact.key.revision;
  a.target = artifact.key.target;
  a.generation = artifact.key.generation;
  a.size = artifact.size_bytes;
  a.origins = origins;
  if (artifact.sha256 && options_.hash_key.empty()) a.sha256 = *artifact.sha256;
  lines_.artifact(a);  // Without its id: the artifact as this caller names it.

  auto [it, fresh] = artifacts_.try_emplace(lines_.take());
  if (fresh) it->second.id = next_artifact_++;
  const std::string id = named('a', it->second.id);
  const std::string demand_id = record_demand_id(demand);
  const std::string owner = owner_name(options.owner);
  format::SubscribeLine subscribe{record_time(t), demand_id, owner, id, options.priority,
                                  std::nullopt, std::nullopt};
  if (options.owner_generation != 0) subscribe.owner_generation = options.owner_generation;
  if (std::isfinite(options.deadline_s))
    subscribe.timeout_s = record_time(std::max(0.0, options.deadline_s - t));
  lines_.write(subscribe);
  const std::string line = lines_.take();
  a.id = id;
  lines_.artifact(a);
  const std::string declaration = lines_.take();
  // Each part declares what it uses: lines that begin a new part declare.
  const bool declare = fresh || it->second.part != part_ ||
                       starts_part(declaration.size() + line.size());
  it->second.part = starts_part(declare ? declaration.size() + line.size() : line.size())
                        ? part_ + 1
                        : part_;
  append(declare ? declaration + line : line);
  return id;
}

bool Recording::starts_part(std::size_t bytes) const {
  return options_.rotate_bytes > 0 && part_bytes_ + bytes > options_.rotate_bytes;
}

void Recording::cancel(double t, DemandHandle demand) {
  lines_.write(format::CancelLine{record_time(t), record_demand_id(demand)});
  append(lines_.take());
}

void Recording::set_priority(double t, DemandHandle demand, Priority priority) {
  lines_.write(format::SetPriorityLine{record_time(t), record_demand_id(demand), priority});
  append(lines_.take());
}

void Recording::end_owner(double t, OwnerId owner, std::optional<OwnerGeneration> generation) {
  std::optional<std::int64_t> up_to;
  if (generation) up_to = *generation;
  lines_.write(format::EndOwnerLine{record_time(t), owner_name(owner), up_to});
  append(lines_.take());
}

void Recording::throttle(double t, const ThrottleConfig& config) {
  lines_.write(format::ThrottleLine{record_time(t), throttle_caps(config)});
  append(lines_.take());
}

// A line never straddles a 4 KiB page of its file: where the next line would,
// a line of spaces (a blank line, which readers skip) fills the page first.
// Linux cuts a write() by a process being killed only between pages, so a
// killed recording ends with a whole line: it is a trace, a prefix of the
// run's. (A line longer than a page, which cannot fit, is written as it is.)
std::string Recording::paged(std::string_view lines) const {
  constexpr std::uint64_t kPage = 4096;
  std::string out;
  out.reserve(lines.size() + 64);
  std::uint64_t at = part_bytes_;
  while (!lines.empty()) {
    const std::size_t newline = lines.find('\n');
    const std::size_t n = newline == std::string_view::npos ? lines.size() : newline + 1;
    const std::uint64_t room = kPage - at % kPage;
    if (n > room && n <= kPage) {
      out.append(static_cast<std::size_t>(room - 1), ' ');
      out += '\n';
      at += room;
    }
    out.append(lines.substr(0, n));
    at += n;
    lines.remove_prefix(n);
  }
  return out;
}

void Recording::append(std::string lines) {
  std::size_t count = 0;
  for (char c : lines)
    count += c == '\n';
  std::unique_lock lock(mutex_);
  if (!status_.error.empty()) return;  // Failed: reported by status().
  if (starts_part(lines.size())) {
    ++part_;
    breaks_.push_back(pending_.size());
    const MeasuredPlatform so_far = measure_ ? measure_() : MeasuredPlatform{};
    std::string head = header(part_, measure_ ? &so_far : nullptr);
    part_bytes_ = head.size();
    pending_ += head;
    ++count;
  }
  lines = paged(lines);
  while (pending_.size() + lines.size() > options_.buffer_bytes && !pending_.empty() &&
         status_.error.empty()) {
    ++status_.waits;  // The disk is behind: wait rather than drop a record.
    wake_writer_.notify_one();
    space_.wait(lock);
  }
  const bool was_small = pending_.size() < options_.buffer_bytes / 2;
  part_bytes_ += lines.size();
  pending_ += lines;
  status_.records += count;
  if (was_small && pending_.size() >= options_.buffer_bytes / 2) wake_writer_.notify_one();
}

bool Recording::write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::lock_guard lock(mutex_);
      if (status_.error.empty()) status_.error = system_error("cannot write", path, n < 0 ? errno : EIO);
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
    std::lock_guard lock(mutex_);
    status_.bytes_written += static_cast<std::uint64_t>(n);
  }
  return true;
}

void Recording::writer_loop() {
  std::string taken;
  std::vector<std::size_t> breaks;
  std::array<std::string, 2> rows;
  const auto interval = std::chrono::duration<double>(options_.flush_interval_s);
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      wake_writer_.wait_for(lock, interval, [this] {
        return stop_ || pending_.size() + pending_rows_ >= options_.buffer_bytes / 2;
      });
      stopping = stop_;
      taken.clear();
      breaks.clear();
      std::swap(taken, pending_);
      std::swap(breaks, breaks_);
      for (std::size_t i = 0; i < sides_.size(); ++i) {
        rows[i].clear();
        std::swap(rows[i], sides_[i].pending);
      }
      pending_rows_ = 0;
    }
    space_.notify_all();
    for (std::size_t i = 0; i < sides_.size(); ++i) {
      if (sides_[i].fd >= 0 && !rows[i].empty()) write_all(sides_[i].fd, rows[i], sides_[i].path);
    }
    std::size_t from = 0;
    breaks.push_back(taken.size());
    for (std::size_t b : breaks) {
      if (fd_ >= 0 && b > from) {
        write_all(fd_, std::string_view(taken).substr(from, b - from), record_part_path(options_.path, file_part_));
      }
      from = b;
      if (b == taken.size()) break;
      // A new part begins here.
      if (fd_ >= 0) ::close(fd_);
      ++file_part_;
      const std::filesystem::path next = record_part_path(options_.path, file_part_);
      fd_ = open_part(next);
      std::lock_guard lock(mutex_);
      ++status_.parts;
      if (fd_ < 0 && status_.error.empty()) status_.error = system_error("cannot create", next, errno);
    }
    if (stopping) {
      std::lock_guard lock(mutex_);
      if (pending_.empty() && pending_rows_ == 0) return;
    }
  }
}

RecordStatus Recording::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

}  // namespace dfl::backend
