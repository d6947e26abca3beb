// tensorops: command-line client for a tensorops server (see --help).
//
// Exit status: 0 success, 1 the call or a file failed, 2 bad usage. Every
// error is one line on stderr: "tensorops: error: ...".
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "client/cli/npy.h"
#include "client/cli/text_format.h"
#include "tensorops/client.h"

namespace tensorops::cli {
namespace {

constexpr char kUsage[] =
    R"(usage: tensorops [--target HOST:PORT] [--deadline DURATION] COMMAND [ARGS]

Calls a tensorops server.

commands:
  run OP [INPUT...] [--attr NAME=VALUE]... [then OP [INPUT...] [--attr ...]]...
      [--output FILE.npy]
      Runs OP (see list-ops) on its inputs, given in the op's input order:
        --input VALUES   inline nested arrays, e.g. '[[1,2],[3,4]]'
                         (complex as [re, im] pairs, strings quoted)
          --dtype T      type of the preceding inline --input: f32 f64 f16 bf16
                         f8e4m3 f8e5m2 i8 i16 i32 i64 u8 u16 u32 u64 bool str
                         c64 c128 (default: i64 for integers, f32 otherwise,
                         bool for true/false, str for quoted strings)
          --shape DIMS   shape of the preceding --input, e.g. 2,3 ('' = scalar)
        --input @FILE.npy   a NumPy .npy file (little-endian, C order)
        --attr NAME=VALUE   an attribute; numbers are sent as numbers,
                         anything else as a string
        --output FILE.npy   write the result to FILE.npy instead of printing it;
                         with --input @FILE.npy first and a streamed call,
                         the data flows file to file in constant memory
        --stream auto|always|never   send the tensors in chunks (ExecuteStream):
                         auto (default) from --stream_threshold bytes of inputs
        --stream_threshold BYTES     default 67108864 (64 MiB)
        --progress auto|always|never   progress bar on stderr (bytes, rate,
                         ETA) for streamed calls: auto (default) draws it when
                         stderr is a terminal and the transfer takes over 1 s
      then OP [INPUT...] [--attr NAME=VALUE]...
                         a chain: runs OP next, in the same call, with the
                         previous op's output as its first input. The --input
                         (--dtype, --shape) and --attr options after it are
                         OP's: its inputs after the first, in its order, and
                         its attributes. Up to 64 times; prints the last op's
                         result. An error in the i-th op after the first
                         reads 'then[i] (OP): ...', i counting from 0
  list-ops          lists every op with its inputs, types and attributes
  health [--service NAME]   prints the serving status; exit 1 unless SERVING

options:
  --target HOST:PORT  server address or gRPC target (default: $TENSOROPS_TARGET,
                      else 127.0.0.1:50051)
  --deadline D        per-call deadline, e.g. 500ms, 10s (default 60s; a
                      streamed call must finish its whole transfer in it)
  --tls_ca FILE       use TLS, trusting the PEM CA certificates in FILE
                      (default: plaintext; --tls_cert alone uses system roots)
  --tls_cert FILE     PEM client certificate for mutual TLS (with --tls_key)
  --tls_key FILE      PEM private key of --tls_cert
  --token_file FILE   send the bearer token in FILE (one line) with every call
  --traceparent TP    run: continue this W3C trace (00-<trace id>-<span id>-<flags>);
                      default: no trace context sent (with --verbose: a new trace)
  --verbose           run: print to stderr the traceparent sent (a new trace
                      without --traceparent), the server's traceparent and
                      server-timing, and a failed call's error details
                      (google.rpc BadRequest, ErrorInfo, RetryInfo)
  --help              this text

examples:
  tensorops health
  tensorops list-ops
  tensorops run Roll --input '[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]' --dtype i32 \
      --input '[-1,2]' --input '[0,1]'
  tensorops run Reverse --attr mode=index --input '[[1,2,3],[4,5,6]]' --dtype f32 \
      --input '[1]'
  tensorops run ReverseSequence --attr batch_axis=0 --attr seq_axis=1 \
      --input @data.npy --input '[3,2,1,0]' --output out.npy
  tensorops --deadline 10m run Roll --input @big.npy --input '[1]' --input '[0]' \
      --output rolled.npy
  tensorops run Reverse --attr mode=index --input '[[1,2,3],[4,5,6]]' --dtype i32 \
      --input '[0]' then Roll --input '[1]' --input '[1]'
)";

// A failure with its exit status.
struct Failure {
  int exit_code;
  std::string message;
};

int Fail(const Failure& f) {
  // One line: the server's message may contain newlines.
  std::string msg = absl::StrReplaceAll(f.message, {{"\n", " "}, {"\r", " "}});
  std::fprintf(stderr, "tensorops: error: %s\n", msg.c_str());
  return f.exit_code;
}
Failure Usage(absl::string_view why) { return {2, absl::StrCat(why, " (see tensorops --help)")}; }
Failure FromStatus(const absl::Status& st) {
  return {1, absl::StrCat(absl::StatusCodeToString(st.code()), ": ", st.message())};
}

struct InputSpec {
  std::string text;  // inline values or @path
  std::optional<DataType> dtype;
  std::optional<std::vector<int64_t>> shape;
};

// One op of `run`: the first, or one after `then`.
struct OpSpec {
  std::string op;
  std::vector<InputSpec> inputs;  // the first op's all; a later op's after the first
  Attrs attrs;
  // How errors name it: "" for the first op, "then[i] (OP) " after it.
  std::string Name(size_t index) const {
    return index == 0 ? "" : absl::StrCat("then[", index - 1, "] (", op, ") ");
  }
};

struct Args {
  std::string target = "127.0.0.1:50051";
  std::optional<std::chrono::milliseconds> deadline;
  std::string command;
  // run: the op, then the ops after each `then`. --input, --dtype, --shape
  // and --attr apply to the last one.
  std::vector<OpSpec> ops;
  std::string output;
  std::string service;
  std::string tls_ca, tls_cert, tls_key, token_file;
  Transport transport = Transport::kAuto;
  int64_t stream_threshold = int64_t{64} << 20;
  std::string progress = "auto";
  std::string traceparent;
  bool verbose = false;
  bool help = false;
};

// The progress bar of a streamed call, on stderr: redrawn in place at most
// ten times a second, from one second into the call, e.g.
//   tensorops: 1.21 GiB of 5.00 GiB  412.3 MiB/s  ETA 9s
// Until the server has run the op, the output's bytes are those of the op's
// output inference (TransferProgress::expected_bytes_to_receive; 0 for an op
// the SDK does not know).
class ProgressBar {
 public:
  explicit ProgressBar(bool always) : always_(always), start_(Clock::now()) {}

  void Update(const TransferProgress& p) {
    const auto now = Clock::now();
    const double elapsed = Seconds(now - start_);
    if (!always_ && elapsed < 1.0) return;
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int64_t done = p.bytes_sent + p.bytes_received;
    const int64_t total = p.bytes_to_send + (p.bytes_to_receive > 0 ? p.bytes_to_receive
                                                                    : p.expected_bytes_to_receive);
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const std::string eta =
        rate > 0 ? absl::StrCat("ETA ", static_cast<int64_t>((total - done) / rate + 0.5), "s")
                 : "ETA ?";
    std::fprintf(stderr, "\rtensorops: %s of %s  %s/s  %s\x1b[K", Size(done).c_str(),
                 Size(total).c_str(), Size(static_cast<int64_t>(rate)).c_str(), eta.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  // Ends the bar's line (if one was drawn) with the totals.
  void Done() {
    if (!drawn_) return;
    const double elapsed = Seconds(Clock::now() - start_);
    std::fprintf(stderr, "\rtensorops: transfer done in %.1fs\x1b[K\n", elapsed);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  static std::string Size(int64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
      v /= 1024;
      ++u;
    }
    return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.2f %s", v, units[u]);
  }

  const bool always_;
  const Clock::time_point start_;
  Clock::time_point last_;
  bool drawn_ = false;
};

// The whole file, or why not.
absl::StatusOr<std::string> ReadWholeFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value flags of `run`, `list-ops` and `health`, in --help's order. The
// parser is hand-written, not absl flags: --input, --dtype, --shape and
// --attr repeat and apply to the op before them (`run A ... then B ...`),
// an order that absl's flags, one value per name, cannot carry.
using FlagSetter = std::optional<Failure> (*)(const std::string& value, Args* args);

std::optional<Failure> SetDeadline(const std::string& value, Args* args) {
  absl::Duration d;
  double secs;
  if (absl::SimpleAtod(value, &secs)) {
    d = absl::Seconds(secs);
  } else if (!absl::ParseDuration(value, &d)) {
    return Usage(absl::StrCat("--deadline '", value, "' is not a duration like 500ms or 10s"));
  }
  if (d <= absl::ZeroDuration()) return Usage("--deadline must be positive");
  args->deadline = std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
  return std::nullopt;
}

std::optional<Failure> AddInput(const std::string& value, Args* args) {
  if (args->ops.empty()) args->ops.emplace_back();
  args->ops.back().inputs.push_back({value, std::nullopt, std::nullopt});
  return std::nullopt;
}

// --dtype and --shape describe the inline --input before them.
absl::StatusOr<InputSpec*> LastInlineInput(absl::string_view name, Args* args) {
  if (args->ops.empty() || args->ops.back().inputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must follow an --input"));
  }
  InputSpec& in = args->ops.back().inputs.back();
  if (absl::StartsWith(in.text, "@")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " applies to inline inputs; ", in.text, " carries its own"));
  }
  return &in;
}

std::optional<Failure> SetDtype(const std::string& value, Args* args) {
  absl::StatusOr<InputSpec*> in = LastInlineInput("dtype", args);
  if (!in.ok()) return Usage(in.status().message());
  absl::StatusOr<DataType> t = ParseDataType(value);
  if (!t.ok()) return Usage(t.status().message());
  (*in)->dtype = *t;
  return std::nullopt;
}

std::optional<Failure> SetShape(const std::string& value, Args* args) {
  absl::StatusOr<InputSpec*> in = LastInlineInput("shape", args);
  if (!in.ok()) return Usage(in.status().message());
  absl::StatusOr<std::vector<int64_t>> shape = ParseShape(value);
  if (!shape.ok()) return Usage(shape.status().message());
  (*in)->shape = *shape;
  return std::nullopt;
}

std::optional<Failure> AddAttr(const std::string& value, Args* args) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Usage(absl::StrCat("--attr '", value, "' is not NAME=VALUE"));
  }
  const std::string key = value.substr(0, eq), text = value.substr(eq + 1);
  if (args->ops.empty()) args->ops.emplace_back();
  Attrs& attrs = args->ops.back().attrs;
  double num;
  if (absl::SimpleAtod(text, &num) && std::isfinite(num)) {
    attrs.insert_or_assign(key, AttrValue(num));  // "nan"/"inf" stay strings
  } else {
    attrs.insert_or_assign(key, AttrValue(text));
  }
  return std::nullopt;
}

std::optional<Failure> SetStream(const std::string& value, Args* args) {
  if (value == "auto") {
    args->transport = Transport::kAuto;
  } else if (value == "always") {
    args->transport = Transport::kStream;
  } else if (value == "never") {
    args->transport = Transport::kUnary;
  } else {
    return Usage(absl::StrCat("--stream '", value, "' is not auto, always or never"));
  }
  return std::nullopt;
}

std::optional<Failure> SetStreamThreshold(const std::string& value, Args* args) {
  if (!absl::SimpleAtoi(value, &args->stream_threshold) || args->stream_threshold < 0) {
    return Usage(absl::StrCat("--stream_threshold '", value, "' is not a byte count >= 0"));
  }
  return std::nullopt;
}

std::optional<Failure> SetProgress(const std::string& value, Args* args) {
  if (value != "auto" && value != "always" && value != "never") {
    return Usage(absl::StrCat("--progress '", value, "' is not auto, always or never"));
  }
  args->progress = value;
  return std::nullopt;
}

// A flag whose value is stored as given.
template <std::string Args::*field>
std::optional<Failure> SetString(const std::string& value, Args* args) {
  args->*field = value;
  return std::nullopt;
}

struct ValueFlag {
  absl::string_view name;
  FlagSetter set;
};
constexpr ValueFlag kValueFlags[] = {
    {"target", &SetString<&Args::target>},
    {"deadline", &SetDeadline},
    {"input", &AddInput},
    {"dtype", &SetDtype},
    {"shape", &SetShape},
    {"attr", &AddAttr},
    {"output", &SetString<&Args::output>},
    {"service", &SetString<&Args::service>},
    {"tls_ca", &SetString<&Args::tls_ca>},
    {"tls_cert", &SetString<&Args::tls_cert>},
    {"tls_key", &SetString<&Args::tls_key>},
    {"token_file", &SetString<&Args::token_file>},
    {"traceparent", &SetString<&Args::traceparent>},
    {"stream", &SetStream},
    {"stream_threshold", &SetStreamThreshold},
    {"progress", &SetProgress},
};

const ValueFlag* FindValueFlag(absl::string_view name) {
  for (const ValueFlag& f : kValueFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// A word that is not an option: the command, an op name, or `then`.
std::optional<Failure> TakePositional(const std::string& a, Args* args) {
  if (args->command.empty()) {
    args->command = a;
  } else if (args->command == "run" && a == "then") {
    if (args->ops.empty() || args->ops.back().op.empty()) {
      return Usage("'then' must follow an op, as in: run Reverse ... then Roll ...");
    }
    args->ops.emplace_back();
  } else if (args->command == "run" && (args->ops.empty() || args->ops.back().op.empty())) {
    if (args->ops.empty()) args->ops.emplace_back();
    args->ops.back().op = a;
  } else {
    return Usage(absl::StrCat("unexpected argument '", a, "'"));
  }
  return std::nullopt;
}

// What no single argument can show: the command, and flags that belong
// together or to one command only.
std::optional<Failure> CheckArgs(const Args& args) {
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    return Usage("--tls_cert and --tls_key go together");
  }
  if (args.command.empty()) return Usage("no command given (run, list-ops or health)");
  if (args.command != "run" && args.command != "list-ops" && args.command != "health") {
    return Usage(absl::StrCat("unknown command '", args.command, "' (run, list-ops or health)"));
  }
  if (args.command == "run") {
    if (args.ops.empty() || args.ops.front().op.empty()) {
      return Usage("run needs an op name, e.g. tensorops run Roll ...");
    }
    if (args.ops.front().inputs.empty()) return Usage("run needs at least one --input");
    if (args.ops.back().op.empty()) {
      return Usage("'then' needs an op name, e.g. then Roll --input 1 --input 0");
    }
  } else if (!args.ops.empty() || !args.output.empty() || args.transport != Transport::kAuto ||
             args.progress != "auto") {
    return Usage(absl::StrCat(
        "--input, --attr, --output, --stream and --progress belong to run, not ", args.command));
  }
  if (!args.service.empty() && args.command != "health") {
    return Usage("--service belongs to health");
  }
  return std::nullopt;
}

// Parses argv; on failure returns the reason.
std::optional<Failure> ParseArgs(int argc, char** argv, Args* args) {
  const std::vector<std::string> av(argv + 1, argv + argc);
  for (size_t i = 0; i < av.size(); ++i) {
    const std::string& a = av[i];
    if (a == "--help" || a == "-h" || a == "help") {
      args->help = true;
      return std::nullopt;
    }
    if (a == "--verbose" || a == "-v") {
      args->verbose = true;
      continue;
    }
    if (absl::StartsWith(a, "--")) {
      // --name=value or --name value
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (const ValueFlag* flag = FindValueFlag(name); flag != nullptr) {
        std::string value;
        if (eq != std::string::npos) {
          value = a.substr(eq + 1);
        } else if (i + 1 < av.size()) {
          value = av[++i];
        } else {
          return Usage(absl::StrCat("--", name, " needs a value"));
        }
        if (std::optional<Failure> f = flag->set(value, args)) return f;
        continue;
      }
    }
    if (absl::StartsWith(a, "-") && a != "-") return Usage(absl::StrCat("unknown option ", a));
    if (std::optional<Failure> f = TakePositional(a, args)) return f;
  }
  return CheckArgs(*args);
}

std::string FormatShape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// --verbose: the call's trace and, for a failure, its details, on stderr.
void PrintTrace(const CallTrace& trace, const absl::Status& status) {
  std::fprintf(stderr, "tensorops: traceparent %s\n", trace.traceparent.c_str());
  if (!trace.server_traceparent.empty()) {
    std::fprintf(stderr, "tensorops: server traceparent %s\n", trace.server_traceparent.c_str());
  }
  if (!trace.server_timing.empty()) {
    std::fprintf(stderr, "tensorops: server-timing %s\n", trace.server_timing.c_str());
  }
  const ErrorDetails details = GetErrorDetails(status);
  for (const ErrorDetails::FieldViolation& v : details.field_violations) {
    std::fprintf(stderr, "tensorops: bad request: field '%s': %s\n", v.field.c_str(),
                 v.description.c_str());
  }
  if (!details.reason.empty()) {
    std::vector<std::string> facts;
    for (const auto& [key, value] : details.metadata)
      facts.push_back(absl::StrCat(key, "=", value));
    std::fprintf(stderr, "tensorops: error info: %s (%s) %s\n", details.reason.c_str(),
                 details.domain.c_str(), absl::StrJoin(facts, " ").c_str());
  }
  if (details.retry_delay.has_value()) {
    std::fprintf(stderr, "tensorops: retry after %lld ms\n",
                 static_cast<long long>(details.retry_delay->count()));
  }
}

// What a run shows besides its result: a progress bar on stderr when asked
// for (or stderr is a terminal), and with --verbose the call's trace. Lives
// on the run's stack: the progress callback points at its bar.
struct Reporting {
  Reporting() = default;
  Reporting(const Reporting&) = delete;
  Reporting& operator=(const Reporting&) = delete;

  CallOptions call;
  std::optional<ProgressBar> bar;
  CallTrace trace;

  void SetUp(const Args& args, const CallOptions& base) {
    call = base;
    if (args.progress == "always" || (args.progress == "auto" && isatty(STDERR_FILENO))) {
      bar.emplace(args.progress == "always");
      call.progress = [this](const TransferProgress& p) { bar->Update(p); };
    }
    if (args.verbose) {
      // A trace to show: the caller's (--traceparent) or a new one.
      call.trace = &trace;
      call.new_trace = true;
    }
  }
  void Done(const Args& args, const absl::Status& status) {
    if (bar.has_value()) bar->Done();
    if (args.verbose) PrintTrace(trace, status);
  }
};

// The streamed call's first input read from its .npy file and the output
// written to one, both by offset (StreamSource/StreamSink): neither file is
// ever in memory. nullopt: the call is not one for this path.
std::optional<int> RunFileToFile(const Args& args, const Client& client, const CallOptions& call,
                                 std::vector<ChainStep>* ops) {
  const InputSpec& first = args.ops.front().inputs.front();
  if (args.output.empty() || !absl::StartsWith(first.text, "@") ||
      args.transport == Transport::kUnary) {
    return std::nullopt;
  }
  const std::string path = first.text.substr(1);
  absl::StatusOr<NpyLayout> layout = ReadNpyLayout(path);
  if (!layout.ok()) {
    return Fail(
        {1, absl::StrCat(args.ops.front().Name(0), "--input 1: ", layout.status().message())});
  }
  if (args.transport == Transport::kAuto && layout->data_bytes < args.stream_threshold) {
    return std::nullopt;
  }
  absl::StatusOr<std::unique_ptr<StreamSource>> source =
      FileSource(path, layout->data_offset, layout->dtype, layout->shape);
  if (!source.ok()) return Fail({1, std::string(source.status().message())});
  absl::Status header_error;
  std::unique_ptr<StreamSink> sink =
      FileSink(args.output, [&header_error](DataType dtype, const std::vector<int64_t>& shape) {
        absl::StatusOr<std::string> h = NpyHeaderFor(dtype, shape);
        if (!h.ok()) header_error = h.status();
        return h.ok() ? *h : std::string();
      });
  ChainStep head = std::move(ops->front());
  std::vector<ChainStep> then(std::make_move_iterator(ops->begin() + 1),
                              std::make_move_iterator(ops->end()));
  Reporting report;
  report.SetUp(args, call);
  const CallOptions& with_progress = report.call;
  absl::Status st = client.ExecuteStreamed(head.op, head.attrs, source->get(), head.inputs, then,
                                           sink.get(), with_progress);
  report.Done(args, st);
  if (st.ok() && !header_error.ok()) st = header_error;
  if (!st.ok()) return Fail(FromStatus(st));
  std::printf("wrote %s: %s %s\n", args.output.c_str(),
              std::string(DataTypeName(layout->dtype)).c_str(), FormatShape(layout->shape).c_str());
  return 0;
}

int Run(const Args& args, const Client& client, const CallOptions& call) {
  // The first op's first input is the chain's data; the rest of its inputs
  // and every later op's are steps' inputs (see Client::Chain). A .npy data
  // input streamed to a .npy output is not read here (RunFileToFile).
  std::vector<ChainStep> ops(args.ops.size());
  for (size_t o = 0; o < args.ops.size(); ++o) {
    const OpSpec& spec = args.ops[o];
    ops[o].op = spec.op;
    ops[o].attrs = spec.attrs;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const InputSpec& in = spec.inputs[i];
      if (o == 0 && i == 0 && !args.output.empty() && absl::StartsWith(in.text, "@")) {
        ops[o].inputs.emplace_back();  // read below, whole or streamed
        continue;
      }
      absl::StatusOr<Tensor> t = absl::StartsWith(in.text, "@")
                                     ? ReadNpyFile(in.text.substr(1))
                                     : ParseTensor(in.text, in.dtype, in.shape);
      if (!t.ok()) {
        return Fail({absl::StartsWith(in.text, "@") ? 1 : 2,
                     absl::StrCat(spec.Name(o), "--input ", i + 1, ": ", t.status().message())});
      }
      ops[o].inputs.push_back(*std::move(t));
    }
  }
  const InputSpec& first = args.ops.front().inputs.front();
  if (!args.output.empty() && absl::StartsWith(first.text, "@")) {
    std::vector<ChainStep> streamed = ops;
    streamed.front().inputs.erase(streamed.front().inputs.begin());
    if (std::optional<int> rc = RunFileToFile(args, client, call, &streamed)) return *rc;
    absl::StatusOr<Tensor> t = ReadNpyFile(first.text.substr(1));
    if (!t.ok()) {
      return Fail({1, absl::StrCat(args.ops.front().Name(0), "--input 1: ", t.status().message())});
    }
    ops.front().inputs.front() = *std::move(t);
  }
  Tensor data = ops.front().inputs.front();
  ops.front().inputs.erase(ops.front().inputs.begin());
  OpChain chain = client.Chain(std::move(data));
  for (ChainStep& op : ops) chain.Then(std::move(op));
  Reporting report;
  report.SetUp(args, call);
  const CallOptions& with_progress = report.call;
  ExecuteResult result = chain.RunAll(with_progress);
  report.Done(args, result.status());
  if (!result.ok()) return Fail(FromStatus(result.status()));
  if (!args.output.empty()) {
    if (result->size() != 1) {
      return Fail({1, absl::StrCat("--output takes one result; the op returned ", result->size())});
    }
    absl::Status st = WriteNpyFile(args.output, result->front());
    if (!st.ok()) return Fail({1, std::string(st.message())});
    std::printf("wrote %s: %s %s\n", args.output.c_str(),
                std::string(DataTypeName(result->front().dtype())).c_str(),
                FormatShape(result->front().shape()).c_str());
    return 0;
  }
  for (const Tensor& t : *result) {
    std::printf("%s %s\n%s\n", std::string(DataTypeName(t.dtype())).c_str(),
                FormatShape(t.shape()).c_str(), FormatTensor(t).c_str());
  }
  return 0;
}

int ListOps(const Client& client, const CallOptions& call) {
  absl::StatusOr<std::vector<OpInfo>> ops = client.ListOps(call);
  if (!ops.ok()) return Fail(FromStatus(ops.status()));
  for (const OpInfo& op : *ops) {
    std::printf("%s", op.name.c_str());
    if (!op.aliases.empty()) std::printf(" (alias %s)", absl::StrJoin(op.aliases, ", ").c_str());
    std::printf("\n  %s\n", op.description.c_str());
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const OpInputInfo& in = op.inputs[i];
      std::vector<std::string> types;
      for (DataType t : in.allowed_types) types.push_back(ShortDataTypeName(t));
      const std::string rank =
          in.max_rank < 0
              ? absl::StrCat(">= ", in.min_rank)
              : (in.min_rank == in.max_rank ? absl::StrCat(in.min_rank)
                                            : absl::StrCat(in.min_rank, "..", in.max_rank));
      std::printf("  input %zu %s: rank %s; %s\n", i + 1, in.name.c_str(), rank.c_str(),
                  types.size() == 18 ? "any type" : absl::StrJoin(types, " ").c_str());
    }
    for (const OpAttributeInfo& a : op.attributes) {
      std::printf(
          "  --attr %s=<%s>%s%s%s\n", a.name.c_str(), a.type.c_str(),
          a.range.empty() ? "" : absl::StrCat(" in ", a.range).c_str(),
          a.required ? " (required)" : "",
          a.default_value.empty() ? "" : absl::StrCat(" (default ", a.default_value, ")").c_str());
    }
  }
  return 0;
}

int Health(const Args& args, const Client& client, const CallOptions& call) {
  absl::StatusOr<ServingStatus> s = client.Health(args.service, call);
  if (!s.ok()) return Fail(FromStatus(s.status()));
  std::printf("%s\n", std::string(ServingStatusName(*s)).c_str());
  return *s == ServingStatus::kServing ? 0 : 1;
}

int Main(int argc, char** argv) {
  Args args;
  if (const char* env = std::getenv("TENSOROPS_TARGET"); env != nullptr && *env != '\0') {
    args.target = env;
  }
  if (std::optional<Failure> f = ParseArgs(argc, argv, &args)) return Fail(*f);
  if (args.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // A short-lived process that moves whole tensors: freed memory kept for
  // the next buffer costs it nothing (tensorops/client.h says why).
  TuneMallocForBigTensors();
  ClientOptions options;
  options.target = args.target;
  options.stream_threshold_bytes = args.stream_threshold;
  // One call per process: retries would only delay a clear error.
  options.retry.max_attempts = 2;
  if (!args.tls_ca.empty() || !args.tls_cert.empty()) {
    TlsOptions tls;
    for (auto [flag, path, field] :
         {std::make_tuple("--tls_ca", &args.tls_ca, &tls.root_certs),
          std::make_tuple("--tls_cert", &args.tls_cert, &tls.client_cert_chain),
          std::make_tuple("--tls_key", &args.tls_key, &tls.client_private_key)}) {
      if (path->empty()) continue;
      absl::StatusOr<std::string> pem = ReadWholeFile(flag, *path);
      if (!pem.ok()) return Fail({1, std::string(pem.status().message())});
      *field = *std::move(pem);
    }
    options.tls = std::move(tls);
  }
  if (!args.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadWholeFile("--token_file", args.token_file);
    if (!token.ok()) return Fail({1, std::string(token.status().message())});
    std::string t = *std::move(token);
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    if (t.empty()) return Fail({1, absl::StrCat("--token_file: ", args.token_file, " is empty")});
    options.bearer_token = std::move(t);
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) return Fail({2, std::string(client.status().message())});
  CallOptions call;
  call.deadline = args.deadline.value_or(std::chrono::seconds(60));
  call.transport = args.transport;
  call.traceparent = args.traceparent;
  if (args.command == "run") return Run(args, **client, call);
  if (args.command == "list-ops") return ListOps(**client, call);
  return Health(args, **client, call);
}

}  // namespace
}  // namespace tensorops::cli

int main(int argc, char** argv) { return tensorops::cli::Main(argc, argv); }
