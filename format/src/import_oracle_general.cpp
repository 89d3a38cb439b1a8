// oracle-general: libCacheSim's binary request trace. Each request is 24
// bytes, little endian, packed, with no header:
//
//   offset 0   uint32  clock_time         the request's time (whole units, s by default)
//   offset 4   uint64  obj_id             the object
//   offset 12  uint32  obj_size           its size in bytes
//   offset 16  int64   next_access_vtime  the index of the object's next request
//                                         (-1: none); not read: a trace is the future
//
// Files compressed with zstd (the published traces are `.oracleGeneral.zst`)
// are recognised by their magic number and decompressed as they are read.
#include <zstd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "demandflight/format/trace.h"
#include "import_sink.h"

namespace dfl::format::import_detail {
namespace {

constexpr std::size_t kRecord = 24;

// Bytes of a file, decompressed when it is zstd.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path)
      : file_(std::fopen(path.c_str(), "rb"), &std::fclose) {
    if (!file_) throw TraceError::unreadable(path);
    path_ = path;
    raw_.resize(ZSTD_DStreamInSize());
    raw_size_ = std::fread(raw_.data(), 1, raw_.size(), file_.get());
    static constexpr unsigned char kMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    if (raw_size_ >= 4 && std::memcmp(raw_.data(), kMagic, 4) == 0) {
      zstd_.reset(ZSTD_createDStream());
      if (!zstd_) throw std::runtime_error("import: cannot start zstd");
    } else if (looks_like_text()) {
      const std::size_t shown = std::min<std::size_t>(raw_size_, 16);
      std::string start(reinterpret_cast<const char*>(raw_.data()), shown);
      for (char& c : start)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      throw TraceError(path, TraceError::Record{1}, "-",
                       "this is text (it begins \"" + start +
                           "\"), not an oracleGeneral binary trace of 24-byte records: a HAR, "
                           "DevTools or CSV log imports with `import har`, `cdp` or `csv`");
    }
  }

  // Its first record's worth of bytes are printable text, with no NUL: a
  // binary record's 64-bit ids and sizes hold zero bytes in all but freak cases.
  bool looks_like_text() const {
    const std::size_t n = std::min(raw_size_, kRecord);
    if (n == 0) return false;
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned char c = raw_[i];
      if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) return false;
    }
    return true;
  }

  bool compressed() const { return zstd_ != nullptr; }

  // Up to `n` bytes into `out`; fewer only at the end.
  std::size_t read(unsigned char* out, std::size_t n, std::uint64_t record) {
    std::size_t got = 0;
    while (got < n) {
      if (!zstd_) {
        if (raw_pos_ == raw_size_ && !refill()) break;
        const std::size_t take = std::min(n - got, raw_size_ - raw_pos_);
        std::memcpy(out + got, raw_.data() + raw_pos_, take);
        raw_pos_ += take;
        got += take;
        continue;
      }
      ZSTD_outBuffer o{out + got, n - got, 0};
      ZSTD_inBuffer i{raw_.data() + raw_pos_, raw_size_ - raw_pos_, 0};
      const std::size_t rc = ZSTD_decompressStream(zstd_.get(), &o, &i);
      if (ZSTD_isError(rc)) {
        throw TraceError(path_, TraceError::Record{record}, "-",
                         std::string("zstd: ") + ZSTD_getErrorName(rc));
      }
      raw_pos_ += i.pos;
      got += o.pos;
      // 0: a frame ended. Without progress, a non-zero answer only asks for
      // the next frame's header: the state stays as it was.
      if (rc == 0 || i.pos > 0 || o.pos > 0) frame_open_ = rc != 0;
      if (o.pos == 0 && raw_pos_ == raw_size_ && !refill()) {
        if (frame_open_) {
          throw TraceError(path_, TraceError::Record{record}, "-",
                           "zstd: the compressed file is truncated");
        }
        break;
      }
    }
    return got;
  }

 private:
  bool refill() {
    raw_pos_ = 0;
    raw_size_ = std::fread(raw_.data(), 1, raw_.size(), file_.get());
    if (std::ferror(file_.get())) throw TraceError(path_, 0, "-", "read error");
    return raw_size_ > 0;
  }

  struct FreeStream {
    void operator()(ZSTD_DStream* s) const { ZSTD_freeDStream(s); }
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::string path_;
  std::vector<unsigned char> raw_;
  std::size_t raw_size_ = 0, raw_pos_ = 0;
  std::unique_ptr<ZSTD_DStream, FreeStream> zstd_;
  bool frame_open_ = false;
};

template <typename T>
T little_endian(const unsigned char* p) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

}  // namespace

std::vector<ImportOption> oracle_general_options() {
  return {
      {"time-unit", "the unit of clock_time: s, ms, us or ns", false, false, "s"},
      {"start", "subtracted from every time, in the file's unit (default: the first request's)",
       false, false, ""},
      {"origin", "the origin every object comes from", false, false, "origin"},
  };
}

void import_oracle_general(const std::vector<std::string>& inputs, OptionReader& options,
                           std::ostream& out) {
  const std::string time_unit = options.text_or("time-unit", "s");
  const double unit = seconds_per_unit(time_unit);
  std::optional<double> start = options.number("start");
  const std::string origin = options.text_or("origin", "origin");
  const std::string name = options.text_or("name", "imported");
  const DemandModel model = read_demand_model(options);
  options.check_all_read("oracle-general");
  if (model.priority_by && model.priority_by->field != "size") {
    throw std::invalid_argument("--priority-by: oracle-general has only the field size");
  }
  if (inputs.empty()) throw std::invalid_argument("no input file");

  Sink sink("oracle-general", inputs, model);
  std::uint64_t total = 0, compressed = 0;
  double last_t = 0;
  bool any = false;
  Request r;
  r.origin = origin;
  std::array<unsigned char, kRecord> rec{};
  for (const std::string& file : inputs) {
    if (sink.full()) break;  // --limit: read no further.
    ByteSource in(file);
    compressed += in.compressed() ? 1 : 0;
    for (std::uint64_t number = 1; !sink.full(); ++number) {
      const std::size_t got = in.read(rec.data(), kRecord, number);
      if (got == 0) break;
      if (got < kRecord) {
        throw TraceError(file, TraceError::Record{number}, "-",
                         "truncated: " + std::to_string(got) + " of its 24 bytes");
      }
      ++total;
      const auto clock = little_endian<std::uint32_t>(rec.data());
      const auto id = little_endian<std::uint64_t>(rec.data() + 4);
      const auto size = little_endian<std::uint32_t>(rec.data() + 12);
      if (!start) start = clock;
      const double t = (clock - *start) * unit;
      if (t < 0) {
        throw TraceError(
            file, TraceError::Record{number}, "clock_time",
            std::to_string(clock) + " is before the start (" + std::to_string(*start) + ")");
      }
      if (any && t < last_t) {
        throw TraceError(file, TraceError::Record{number}, "clock_time",
                         std::to_string(clock) +
                             " goes backwards (the trace must be in time "
                             "order)");
      }
      last_t = t;
      any = true;
      if (size == 0) {
        sink.skip("size 0");
        continue;
      }
      r.t = t;
      r.object = std::to_string(id);
      r.size = size;
      r.demand = "r" + std::to_string(total);
      sink.request(r);
    }
  }
  sink.count("records", total);
  if (sink.full()) sink.count("read_up_to_the_limit");
  ojson used = options.as_json();
  used["time-unit"] = time_unit;
  used["start"] = start.value_or(0);
  used["origin"] = origin;
  used["zstd_inputs"] = compressed;
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
