// tensorops-server: main. The flags (--help is the flag reference), each
// into ServerOptions (server/server.h: each door's Options and the call
// pipeline's); then the server: the gRPC door (tensorops.v1.TensorOps, the
// Open Inference Protocol, grpc.health.v1.Health, reflection: --port,
// --listen), the HTTP/REST door (the Open Inference Protocol: --http_port)
// and Prometheus metrics over HTTP (--metrics_port), until SIGTERM/SIGINT
// drains it.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/buffer_cache.h"
#include "kernels/huge_pages.h"
#include "server/core/logging.h"
#include "server/fd_budget.h"
#include "server/heap_trimmer.h"
#include "server/memory_limit.h"
#include "server/server.h"

ABSL_DECLARE_FLAG(std::string, test_only_kernel_gate);
ABSL_DECLARE_FLAG(std::string, test_only_grpc_channel_args);

ABSL_FLAG(std::string, host, tensorops::ServerOptions().grpc.host,
          "Address to listen on for gRPC (0.0.0.0 accepts connections from other hosts).");
ABSL_FLAG(int, port, tensorops::ServerOptions().grpc.port,
          "gRPC port; 0 picks a free port (printed at start).");
ABSL_FLAG(std::vector<std::string>, listen, tensorops::ServerOptions().grpc.listen,
          "More addresses to serve the same services on, comma-separated, as gRPC names "
          "them: e.g. unix:/run/tensorops/tensorops.sock for sidecars on this host, or "
          "0.0.0.0:50052. TLS and the bearer token apply to each.");
ABSL_FLAG(std::string, shared_memory, "none",
          "Open Inference Protocol shared memory: 'none' (default) or 'system' (callers on this "
          "host may register POSIX shared-memory objects, which the server then maps; never "
          "turn on for callers you would not let open files under /dev/shm).");
ABSL_FLAG(std::string, shared_memory_key_prefix,
          tensorops::ServerOptions().shared_memory_key_prefix,
          "With --shared_memory=system: only shared-memory keys starting with this (e.g. "
          "/tensorops-) may be registered; empty allows any.");
ABSL_FLAG(int, threads, tensorops::ServerOptions().threads,
          "Kernel thread pool size; 0 means one per hardware thread.");
ABSL_FLAG(int64_t, max_queue, tensorops::ServerOptions().max_queue,
          "Requests that may wait for a kernel thread; past it, RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, max_inflight_bytes, -1,
          "Budget of request + response bytes over all admitted requests; past it, "
          "RESOURCE_EXHAUSTED. -1 (default): 40% of the memory limit (the cgroup's "
          "memory.max or memory.limit_in_bytes, else the machine's MemTotal), logged at start.");
ABSL_FLAG(int64_t, grpc_memory_bytes, -1,
          "gRPC's memory quota (grpc::ResourceQuota): what the transport may buffer, also "
          "for calls not yet admitted; near it gRPC shrinks flow-control windows, past it it "
          "cancels streams with RESOURCE_EXHAUSTED. -1 (default): 20% of the memory limit; "
          "0: no quota.");
ABSL_FLAG(bool, grpc_bdp_probe, true,
          "gRPC's BDP probe: grows each stream's HTTP/2 receive window with the measured "
          "bandwidth-delay product. false keeps it at gRPC's initial size, so gRPC holds little "
          "per stream "
          "before the server reads it (many flowing streams under a small memory limit: "
          "docs/reliability.md) at the cost of throughput over links with a long round trip.");
ABSL_FLAG(int64_t, max_message_bytes, tensorops::ServerOptions().grpc.max_message_bytes,
          "Largest gRPC message received or sent (default fits a 256 MiB tensor in raw_data); "
          "larger requests get RESOURCE_EXHAUSTED from gRPC.");
ABSL_FLAG(std::string, metrics_host, tensorops::ServerOptions().metrics_host,
          "Address of the Prometheus /metrics endpoint.");
ABSL_FLAG(int, metrics_port, tensorops::ServerOptions().metrics_port,
          "Port of the Prometheus /metrics endpoint; 0 picks a free port, -1 disables it.");
ABSL_FLAG(std::string, http_host, tensorops::ServerOptions().http.host,
          "Address of the Open Inference Protocol over HTTP/REST (KServe v2, Triton's binary "
          "tensor extension).");
ABSL_FLAG(int, http_port, tensorops::HttpServer::Options().port,
          "Port of the Open Inference Protocol over HTTP/REST; 0 picks a free port, -1 "
          "disables it. Its body limit is --max_message_bytes. With --tls_cert it serves "
          "HTTPS only (and with --tls_client_ca mutual TLS), as the gRPC port.");
ABSL_FLAG(int, http_threads, tensorops::ServerOptions().http.loops,
          "Event-loop threads of the HTTP/REST port; connections are handed to them in "
          "turn and each serves its own (reading bodies, parsing JSON, small kernels "
          "inline); 0: one per core, at most 4.");
ABSL_FLAG(int64_t, http_max_connections, tensorops::ServerOptions().http.max_connections,
          "Most connections open at once on the HTTP/REST port. At the cap a new connection "
          "closes the one idle longest (waiting for a request, no byte of it read); when none "
          "is idle it gets 503 and is closed. -1 (default): derived from the file descriptor "
          "limit (logged at start).");
ABSL_FLAG(absl::Duration, http_header_timeout, tensorops::ServerOptions().http.header_timeout,
          "Time for a whole HTTP request header: from the connection's accept for its first "
          "request (TLS handshake included), from the first byte for a keep-alive "
          "connection's next; past it 408 and close (silent connections are closed "
          "unanswered).");
ABSL_FLAG(absl::Duration, http_idle_timeout, tensorops::ServerOptions().http.idle_timeout,
          "A keep-alive HTTP connection with no request for this long is closed.");
ABSL_FLAG(int64_t, http_min_body_rate, tensorops::ServerOptions().http.min_body_rate,
          "Slowest HTTP request body accepted, in bytes/s, measured over every "
          "--http_body_rate_window; slower: 408 and close. 0: no rate (a body then has 120 s).");
ABSL_FLAG(absl::Duration, http_body_rate_window, tensorops::ServerOptions().http.body_rate_window,
          "The window --http_min_body_rate is measured over (>= 1s): a body may stall up to "
          "this long.");
ABSL_FLAG(absl::Duration, drain_timeout, tensorops::ServerOptions().drain_timeout,
          "On SIGTERM/SIGINT: how long admitted requests may take to finish before queued "
          "ones are dropped with UNAVAILABLE.");
ABSL_FLAG(bool, access_log, tensorops::ServerOptions().call.access_log,
          "Log one line per request (op, status, bytes, microseconds, trace and span id) to "
          "stderr.");
namespace tensorops {
// --trace_headers as Abseil's flags read and print it: auto, true or false
// (found by argument-dependent lookup; a bad value is a usage error).
bool AbslParseFlag(absl::string_view text, TraceHeaders* mode, std::string* error) {
  if (text == "auto") {
    *mode = TraceHeaders::kAuto;
  } else if (text == "true") {
    *mode = TraceHeaders::kOn;
  } else if (text == "false") {
    *mode = TraceHeaders::kOff;
  } else {
    *error = "must be 'auto', 'true' or 'false'";
    return false;
  }
  return true;
}
std::string AbslUnparseFlag(TraceHeaders mode) {
  return mode == TraceHeaders::kAuto ? "auto" : mode == TraceHeaders::kOn ? "true" : "false";
}
}  // namespace tensorops

ABSL_FLAG(tensorops::TraceHeaders, trace_headers, tensorops::CallPipeline::Options().trace_headers,
          "When to send a call's W3C traceparent back (gRPC initial metadata, HTTP header) and "
          "what it spent where (gRPC trailing metadata server-timing, HTTP Server-Timing: "
          "queue, kernel, total in ms): 'auto' (default) to a call that arrived with a sampled "
          "traceparent, 'true' to every call, 'false' never. Trace ids in log lines do not "
          "depend on it.");
ABSL_FLAG(std::string, otlp_endpoint, "",
          "An OpenTelemetry collector's OTLP/HTTP address, http://HOST:4318 (its /v1/traces; a "
          "URL with a path is used as is): every sampled call's span, with its queue and kernel "
          "stages as child spans, is sent there as OTLP JSON in batches, off the call's path; "
          "when the collector is slow or gone spans are dropped and counted "
          "(tensorops_spans_dropped_total). Empty (the default): no export.");
ABSL_FLAG(std::string, log_level, "info", "Least severe log line printed: error, warning, info.");
ABSL_FLAG(int64_t, min_parallel_bytes, tensorops::kDefaultMinParallelBytes,
          "Output size from which one request is split across the kernel pool.");
ABSL_FLAG(int64_t, inline_max_bytes, tensorops::ServerOptions().call.inline_max_bytes,
          "Requests whose output is smaller than this run on the gRPC thread that received "
          "them instead of the kernel pool (saves a thread hand-off and a wake-up per small "
          "call; a bigger kernel still splits across the pool); 0 keeps every kernel on the "
          "pool.");
ABSL_FLAG(absl::Duration, budget_wait, tensorops::ServerOptions().call.budget_wait,
          "How long a unary call (either door), or an ExecuteStream at its header, refused "
          "only because the in-flight byte "
          "budget is busy waits for it, first come first served, before the refusal goes out "
          "(also bounded by the call's deadline); 0: refused at once.");
ABSL_FLAG(bool, malloc_tuning, true,
          "Keep freed tensor buffers (up to 32 MiB each) in the heap for reuse instead of "
          "returning them to the OS, avoiding a page fault per 4 KiB on every large request. "
          "Memory is not returned to the OS after a burst (see --malloc_trim_interval).");
ABSL_FLAG(absl::Duration, malloc_trim_interval, absl::Seconds(10),
          "Every this often, the heap's free pages are returned to the OS (glibc's "
          "malloc_trim), so resident memory follows what the server holds instead of the "
          "highest it ever held (docs/reliability.md); a page freed and reused within one "
          "interval is not faulted in again. 0 never trims.");
ABSL_FLAG(int64_t, buffer_cache_bytes, -1,
          "Freed tensor buffers of 8 MiB and more (ExecuteStream's inputs and outputs) kept, "
          "up to this many bytes, for the next call of about the same size to reuse instead "
          "of faulting in fresh pages; 0 turns the cache off. -1 (default): 10% of the memory "
          "limit, at most 2 GiB.");
ABSL_FLAG(absl::Duration, buffer_cache_idle, tensorops::BufferCache::kDefaultIdle,
          "How long a cached buffer (--buffer_cache_bytes) is kept unused before it is "
          "returned to the OS.");
// Request size limits (wire/limits.h; README "Limits").
ABSL_FLAG(int64_t, max_rank, tensorops::RequestLimits().max_rank,
          "Largest rank of any input tensor (NumPy's limit); past it, INVALID_ARGUMENT.");
ABSL_FLAG(int64_t, max_tensor_elements, tensorops::RequestLimits().max_tensor_elements,
          "Most elements in any one input tensor; past it, RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, max_tensor_bytes, tensorops::RequestLimits().max_tensor_bytes,
          "Most decoded bytes in any one input tensor (STRING: 16 per element plus the "
          "characters); past it, RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, max_request_bytes, tensorops::RequestLimits().max_request_bytes,
          "Most decoded bytes of all inputs plus the output of one request; past it, "
          "RESOURCE_EXHAUSTED.");
// ExecuteStream (README "Big tensors: ExecuteStream").
ABSL_FLAG(int64_t, max_stream_bytes, tensorops::RequestLimits().max_stream_bytes,
          "Most bytes of inputs plus output in one ExecuteStream call (tensors past "
          "--max_tensor_bytes go this way); past it, RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, stream_chunk_bytes, tensorops::kDefaultStreamChunkBytes,
          "Largest ExecuteStream chunk accepted, and the size of the chunks sent back "
          "(at least 4096; capped at --max_message_bytes minus 64 KiB).");
ABSL_FLAG(int64_t, stream_window_bytes, tensorops::kDefaultStreamWindowBytes,
          "Most bytes one flowing ExecuteStream (StreamHeader.flow) holds at a time: input being "
          "placed plus output not yet sent, whatever the tensor's size; admission counts this "
          "for it instead of its inputs and output (at least 4 x --stream_chunk_bytes). "
          "Layouts whose output pieces are tiny (docs/server.md) are buffered within "
          "--max_stream_bytes instead.");
// Transport security and connection management (README "Security").
ABSL_FLAG(std::string, tls_cert, "",
          "PEM server certificate chain; with --tls_key, the gRPC and HTTP ports serve TLS "
          "only (default: plaintext).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set (needs --tls_cert), every client must present a "
          "certificate signed by it (mutual TLS), else the handshake fails.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a bearer token (one line; read once at start; empty file is an "
          "error). When set, every tensorops.v1.TensorOps call must send "
          "'authorization: Bearer <token>', else UNAUTHENTICATED; health and reflection "
          "stay open.");
ABSL_FLAG(absl::Duration, keepalive_time, tensorops::ServerOptions().grpc.keepalive_time,
          "Interval of HTTP/2 keepalive pings to each client (also idle ones); 0 = gRPC's "
          "default (2h).");
ABSL_FLAG(absl::Duration, keepalive_timeout, tensorops::ServerOptions().grpc.keepalive_timeout,
          "A connection whose keepalive ping is not answered within this is closed.");
ABSL_FLAG(absl::Duration, max_connection_age, tensorops::ServerOptions().grpc.max_connection_age,
          "Connections are closed (GOAWAY, +-10% jitter) after this long, so clients "
          "reconnect and L4 load balancers rebalance; 0 = never.");
ABSL_FLAG(absl::Duration, max_connection_age_grace,
          tensorops::ServerOptions().grpc.max_connection_age_grace,
          "After --max_connection_age, how long calls in flight may finish before the "
          "connection is closed; 0 = unlimited.");
ABSL_FLAG(absl::Duration, max_connection_idle, tensorops::ServerOptions().grpc.max_connection_idle,
          "Connections with no call for this long are closed (GOAWAY); 0 = never.");
ABSL_FLAG(int64_t, grpc_max_connections, tensorops::ServerOptions().grpc.max_connections,
          "Most connections open at once on the plaintext gRPC addresses (--port, --listen); "
          "one more is closed as soon as it is accepted (the client sees UNAVAILABLE). -1 "
          "(default): derived from the file descriptor limit (logged at start). Not "
          "enforced with --tls_cert.");
ABSL_FLAG(int, grpc_max_concurrent_streams, tensorops::ServerOptions().grpc.max_concurrent_streams,
          "Calls one client may have open on one gRPC connection (HTTP/2 "
          "SETTINGS_MAX_CONCURRENT_STREAMS); gRPC clients queue further calls until one ends.");
ABSL_FLAG(absl::Duration, grpc_min_ping_interval, tensorops::ServerOptions().grpc.min_ping_interval,
          "Client HTTP/2 pings closer together than this with no data between them are "
          "strikes; the third closes the connection (GOAWAY too_many_pings). Clients' "
          "keepalive time must be at least this.");

namespace {

using tensorops::Log;
using tensorops::LogLevel;

// main's two ways to stop before serving: a usage error (printed, exit 2) and
// a start failure (logged, exit 1). Each returns the exit status.
int UsageError(absl::string_view message) {
  std::fprintf(stderr, "tensorops-server: %s\n", std::string(message).c_str());
  return 2;
}
int StartFailure(absl::string_view message) {
  Log(LogLevel::kError, absl::StrCat("cannot start: ", message));
  return 1;
}

// --help lists this file's flags only (Abseil lists flags of files named
// after the binary; ours has a '-' where this file has a '_').
void ConfigureUsage() {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tensorops_server");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Serves tensor data-movement ops (Reverse, ReverseSequence, Roll, onnx.ReverseSequence) "
      "over gRPC (tensorops.v1 and the Open Inference Protocol, with health and reflection) and "
      "HTTP/REST (the Open Inference Protocol), with Prometheus metrics.\n"
      "Usage: tensorops-server [--host=127.0.0.1] [--port=50051] [flags]");
}

// Process-wide switches, set before any thread starts.
void TuneProcess() {
  // Debian's Abseil is built without NDEBUG, so each absl::Mutex lock (gRPC
  // takes several per call) also ran Abseil's deadlock-cycle detection under
  // one process-wide lock, and each Mutex destroyed left its graph node under
  // it (docs/benchmarks-history.md, "Issue 30 session"). Off, as in a
  // release build of Abseil.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (absl::GetFlag(FLAGS_malloc_tuning)) {
    // First-touch page faults cost more than the copy itself
    // (../shared/perf-notes.md): see kernels/huge_pages.h.
    tensorops::TuneMallocForBigBuffers();
  }
}

// What the process runs under, read before any thread starts: the memory
// limit (budgets left at -1 come from it, so a burst is refused with
// RESOURCE_EXHAUSTED before the OOM killer ends the process: docs/server.md
// "Memory limit") and the descriptor limit, soft raised to hard (the doors'
// connection caps left at -1 come from it: server/fd_budget.h).
struct ProcessLimits {
  tensorops::MemoryLimit memory;
  tensorops::MemoryBudget budget;
  tensorops::FdLimit fds;
};

// A budget flag's value: the flag's, or the memory limit's share at -1.
int64_t Derived(int64_t flag, int64_t from_limit) { return flag == -1 ? from_limit : flag; }
const char* How(int64_t flag) { return flag == -1 ? " (derived)" : " (flag)"; }

// Reads the limits and configures the buffer cache; 0, or the exit status.
int ReadProcessLimits(ProcessLimits* limits) {
  for (const auto& [name, value] :
       {std::pair{"--max_inflight_bytes", absl::GetFlag(FLAGS_max_inflight_bytes)},
        std::pair{"--grpc_memory_bytes", absl::GetFlag(FLAGS_grpc_memory_bytes)},
        std::pair{"--buffer_cache_bytes", absl::GetFlag(FLAGS_buffer_cache_bytes)}}) {
    if (value < -1) return UsageError(absl::StrCat(name, " must be >= 0 (or -1: derived)"));
  }
  absl::StatusOr<tensorops::MemoryLimit> memory = tensorops::DetectMemoryLimit();
  if (!memory.ok()) {
    return StartFailure(absl::StrCat(memory.status().message(),
                                     " (set --max_inflight_bytes, --grpc_memory_bytes and "
                                     "--buffer_cache_bytes)"));
  }
  limits->memory = *memory;
  limits->budget = tensorops::BudgetFor(memory->bytes);
  tensorops::BufferCache::Global().Configure(
      Derived(absl::GetFlag(FLAGS_buffer_cache_bytes), limits->budget.buffer_cache_bytes),
      absl::GetFlag(FLAGS_buffer_cache_idle));
  absl::StatusOr<tensorops::FdLimit> fds = tensorops::RaiseFdLimit();
  if (!fds.ok()) return StartFailure(fds.status().message());
  limits->fds = *fds;
  return 0;
}

// The gRPC door's flags (and the transport security both doors share).
void GrpcFlags(tensorops::ServerOptions* options) {
  options->grpc.host = absl::GetFlag(FLAGS_host);
  options->grpc.port = absl::GetFlag(FLAGS_port);
  for (const std::string& address : absl::GetFlag(FLAGS_listen)) {
    if (!address.empty()) options->grpc.listen.push_back(address);
  }
  options->tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options->tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options->tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options->grpc.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  options->grpc.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  options->grpc.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options->grpc.max_connection_age_grace = absl::GetFlag(FLAGS_max_connection_age_grace);
  options->grpc.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  options->grpc.max_connections = absl::GetFlag(FLAGS_grpc_max_connections);
  options->grpc.max_concurrent_streams = absl::GetFlag(FLAGS_grpc_max_concurrent_streams);
  options->grpc.min_ping_interval = absl::GetFlag(FLAGS_grpc_min_ping_interval);
}

// The HTTP door's flags and the metrics endpoint's.
void HttpFlags(tensorops::ServerOptions* options) {
  options->metrics_host = absl::GetFlag(FLAGS_metrics_host);
  options->metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options->http.host = absl::GetFlag(FLAGS_http_host);
  options->http.port = absl::GetFlag(FLAGS_http_port);
  options->http.loops = absl::GetFlag(FLAGS_http_threads);
  options->http.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  options->http.header_timeout = absl::GetFlag(FLAGS_http_header_timeout);
  options->http.idle_timeout = absl::GetFlag(FLAGS_http_idle_timeout);
  options->http.min_body_rate = absl::GetFlag(FLAGS_http_min_body_rate);
  options->http.body_rate_window = absl::GetFlag(FLAGS_http_body_rate_window);
}

// The call path's flags: pool, admission, limits, logging, auth.
void CallFlags(const tensorops::MemoryBudget& budget, tensorops::ServerOptions* options) {
  options->threads = absl::GetFlag(FLAGS_threads);
  options->max_queue = absl::GetFlag(FLAGS_max_queue);
  options->max_inflight_bytes =
      Derived(absl::GetFlag(FLAGS_max_inflight_bytes), budget.max_inflight_bytes);
  options->grpc.memory_bytes =
      Derived(absl::GetFlag(FLAGS_grpc_memory_bytes), budget.grpc_memory_bytes);
  options->grpc.bdp_probe = absl::GetFlag(FLAGS_grpc_bdp_probe);
  options->call.test_kernel_gate = absl::GetFlag(FLAGS_test_only_kernel_gate);
  for (absl::string_view arg :
       absl::StrSplit(absl::GetFlag(FLAGS_test_only_grpc_channel_args), ',', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(arg, '=');
    int value = 0;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &value)) {
      std::fprintf(stderr, "--test_only_grpc_channel_args: '%s' is not name=integer\n",
                   std::string(arg).c_str());
      std::exit(2);
    }
    options->grpc.extra_channel_args.emplace_back(std::string(kv.first), value);
  }
  options->grpc.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options->drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  options->call.access_log = absl::GetFlag(FLAGS_access_log);
  options->otlp_endpoint = absl::GetFlag(FLAGS_otlp_endpoint);
  options->call.min_parallel_bytes = absl::GetFlag(FLAGS_min_parallel_bytes);
  options->call.inline_max_bytes = absl::GetFlag(FLAGS_inline_max_bytes);
  options->call.budget_wait = absl::GetFlag(FLAGS_budget_wait);
  options->shared_memory_key_prefix = absl::GetFlag(FLAGS_shared_memory_key_prefix);
  options->call.limits.max_rank = absl::GetFlag(FLAGS_max_rank);
  options->call.limits.max_tensor_elements = absl::GetFlag(FLAGS_max_tensor_elements);
  options->call.limits.max_tensor_bytes = absl::GetFlag(FLAGS_max_tensor_bytes);
  options->call.limits.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  options->call.limits.max_stream_bytes = absl::GetFlag(FLAGS_max_stream_bytes);
  options->call.limits.stream_chunk_bytes = absl::GetFlag(FLAGS_stream_chunk_bytes);
  options->call.limits.stream_window_bytes = absl::GetFlag(FLAGS_stream_window_bytes);
}

// Every flag into ServerOptions, validated (Start validates too; checked
// here first so a bad flag is a usage error); 0, or the exit status.
int OptionsFromFlags(const tensorops::MemoryBudget& budget, tensorops::ServerOptions* options) {
  GrpcFlags(options);
  HttpFlags(options);
  CallFlags(budget, options);
  options->call.trace_headers = absl::GetFlag(FLAGS_trace_headers);
  if (const std::string shm = absl::GetFlag(FLAGS_shared_memory); shm == "system") {
    options->shared_memory = true;
  } else if (shm != "none") {
    return UsageError(absl::StrCat("--shared_memory must be 'none' or 'system', not '", shm, "'"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = tensorops::ReadAuthTokenFile(path);
    if (!token.ok()) return StartFailure(token.status().message());
    options->call.auth_token = *std::move(token);
  }
  if (absl::Status valid = options->Validate(); !valid.ok()) return UsageError(valid.message());
  return 0;
}

// Machine-readable lines on stdout (tests and scripts read the ports here).
void PrintAddresses(const tensorops::ServerOptions& options,
                    const tensorops::TensorOpsServer& server) {
  std::printf("tensorops-server listening on %s:%d\n", options.grpc.host.c_str(), server.port());
  for (const std::string& address : options.grpc.listen) {
    std::printf("tensorops-server also listening on %s\n", address.c_str());
  }
  if (server.metrics_port() >= 0) {
    std::printf("tensorops-server metrics on http://%s:%d/metrics\n", options.metrics_host.c_str(),
                server.metrics_port());
  }
  if (server.http_port() >= 0) {
    std::printf("tensorops-server http on %s://%s:%d\n",
                options.tls_cert_file.empty() ? "http" : "https", options.http.host.c_str(),
                server.http_port());
  }
  std::fflush(stdout);
}

// The limits in force and where each came from (flag or derived).
void LogLimits(const ProcessLimits& limits, const tensorops::ServerOptions& options,
               const tensorops::TensorOpsServer& server) {
  Log(LogLevel::kInfo,
      absl::StrCat(
          "memory limit ", limits.memory.bytes, " bytes from ", limits.memory.source,
          ": max_inflight_bytes ", options.max_inflight_bytes,
          How(absl::GetFlag(FLAGS_max_inflight_bytes)), ", grpc_memory_bytes ",
          options.grpc.memory_bytes, How(absl::GetFlag(FLAGS_grpc_memory_bytes)),
          ", buffer_cache_bytes ",
          Derived(absl::GetFlag(FLAGS_buffer_cache_bytes), limits.budget.buffer_cache_bytes),
          How(absl::GetFlag(FLAGS_buffer_cache_bytes))));
  Log(LogLevel::kInfo,
      absl::StrCat("fd limit ", limits.fds.soft, " (was ", limits.fds.was, ", hard ",
                   limits.fds.hard, "): grpc_max_connections ",
                   server.grpc_max_connections() > 0
                       ? absl::StrCat(server.grpc_max_connections(),
                                      How(absl::GetFlag(FLAGS_grpc_max_connections)))
                       : std::string("none (TLS: gRPC's own listener)"),
                   ", grpc_max_concurrent_streams ", options.grpc.max_concurrent_streams));
  if (server.http_max_connections() >= 0) {
    Log(LogLevel::kInfo,
        absl::StrCat("http limits: max_connections ", server.http_max_connections(),
                     How(absl::GetFlag(FLAGS_http_max_connections)), " of fd limit ",
                     limits.fds.soft, ", header_timeout ",
                     absl::FormatDuration(options.http.header_timeout), ", idle_timeout ",
                     absl::FormatDuration(options.http.idle_timeout), ", min_body_rate ",
                     options.http.min_body_rate, " bytes/s per ",
                     absl::FormatDuration(options.http.body_rate_window)));
  }
  Log(LogLevel::kInfo,
      absl::StrCat("started: grpc ", options.grpc.host, ":", server.port(), ", metrics port ",
                   server.metrics_port(), ", ", server.threads(), " kernel threads, max_queue ",
                   options.max_queue, ", max_inflight_bytes ", options.max_inflight_bytes,
                   ", transport ",
                   options.tls_cert_file.empty()        ? "plaintext"
                   : options.tls_client_ca_file.empty() ? "TLS"
                                                        : "mutual TLS",
                   options.call.auth_token.empty() ? "" : ", bearer token required",
                   options.shared_memory ? ", system shared memory on" : ""));
}

// Serves until SIGINT or SIGTERM (blocked in `signals` before any thread
// started, so only the waiter sees them), drains, and tears down.
void ServeUntilSignal(std::unique_ptr<tensorops::TensorOpsServer> server, const sigset_t& signals) {
  std::thread waiter([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    Log(LogLevel::kInfo, absl::StrCat("signal ", sig, ": shutting down"));
    server->Shutdown();
  });
  server->Wait();
  waiter.join();
  // Each phase's time goes into the last line, so a slow stop says where it
  // spent its time (drain and gRPC shutdown above, then the pool and the
  // metrics endpoint here).
  const absl::Time teardown_start = absl::Now();
  server.reset();
  Log(LogLevel::kInfo, absl::StrCat("stopped (pool and metrics endpoint teardown ",
                                    absl::FormatDuration(absl::Now() - teardown_start), ")"));
}

}  // namespace

// Reads flags, tunes the process, logs, starts, waits.
int main(int argc, char** argv) {
  ConfigureUsage();
  absl::ParseCommandLine(argc, argv);
  TuneProcess();
  ProcessLimits limits;
  if (int exit_code = ReadProcessLimits(&limits); exit_code != 0) return exit_code;
  absl::StatusOr<LogLevel> level = tensorops::ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) return UsageError(absl::StrCat("--log_level: ", level.status().message()));
  tensorops::SetLogLevel(*level);

  // Block SIGINT/SIGTERM before any thread starts so only the waiter sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const tensorops::HeapTrimmer trimmer(absl::GetFlag(FLAGS_malloc_trim_interval));

  tensorops::ServerOptions options;
  if (int exit_code = OptionsFromFlags(limits.budget, &options); exit_code != 0) return exit_code;
  absl::StatusOr<std::unique_ptr<tensorops::TensorOpsServer>> server =
      tensorops::TensorOpsServer::Start(options);
  if (!server.ok()) return StartFailure(server.status().message());
  PrintAddresses(options, **server);
  LogLimits(limits, options, **server);
  ServeUntilSignal(*std::move(server), signals);
  return 0;
}
