#include "server/server.h"

#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.pb.h"
#include "server/core/logging.h"
#include "server/fd_budget.h"
#include "server/grpc/server_sockets.h"
#include "server/http/tls_context.h"

namespace tensorops {
namespace {

constexpr char kServiceName[] = "tensorops.v1.TensorOps";
// The drain (see Shutdown): how long health watchers get to read NOT_SERVING
// before the connections close; how long calls dropped at the drain timeout
// get to send their UNAVAILABLE; how long gRPC gets to close connections
// after their FIN.
constexpr absl::Duration kAnnounceNotServing = absl::Milliseconds(100);
constexpr absl::Duration kAbortedCallsWait = absl::Seconds(1);
constexpr absl::Duration kConnectionsCloseWait = absl::Seconds(2);

// Set once a drain has shut a listener down (Shutdown, step 3).
std::atomic<bool> g_listeners_shut{false};

// Set when GRPC_VERBOSITY is not: gRPC then logs at INFO and GrpcLog keeps
// only the INFO lines in kGrpcInfoKept.
std::atomic<bool> g_grpc_info_filtered{false};

// gRPC's INFO lines worth an operator's eye at the default verbosity: a
// peer's GOAWAY with an error code (gRPC logs it at INFO, whatever tracing
// says: a balancer aborting its connection to this replica, say HAProxy's
// INTERNAL_ERROR of issue 36, whose streams then fail) and a keepalive
// watchdog closing a connection. The rest of INFO is gRPC's chatter.
constexpr const char* kGrpcInfoKept[] = {"Got goaway", "Keepalive watchdog fired"};

// gRPC's own log lines (errors, and the INFO lines above, unless
// GRPC_VERBOSITY says otherwise) in the server's format. One line is
// dropped: the "Failed accept4" of gRPC's accept loop when the drain has
// shut the listener down, which is the drain working, not an error.
void GrpcLog(gpr_log_func_args* args) {
  LogLevel level = LogLevel::kInfo;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) {
    if (g_listeners_shut.load(std::memory_order_relaxed) &&
        std::strstr(args->message, "Failed accept4") != nullptr) {
      return;
    }
    level = LogLevel::kError;
  } else if (g_grpc_info_filtered.load(std::memory_order_relaxed)) {
    const auto kept = [args](const char* text) {
      return std::strstr(args->message, text) != nullptr;
    };
    if (std::none_of(std::begin(kGrpcInfoKept), std::end(kGrpcInfoKept), kept)) return;
    level = LogLevel::kWarning;
  }
  const char* slash = std::strrchr(args->file, '/');
  Log(level, absl::StrCat("grpc ", slash != nullptr ? slash + 1 : args->file, ":", args->line, ": ",
                          args->message));
}

absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  return ss.str();
}

int64_t ClampMs(absl::Duration d) {
  return std::min<int64_t>(absl::ToInt64Milliseconds(d), std::numeric_limits<int>::max());
}

// The TLS files, read once for both doors (gRPC and HTTPS use the same
// text); nullopt when TLS is off.
absl::StatusOr<std::optional<TlsPem>> ReadTlsFiles(const ServerOptions& options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (options.tls_cert_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    }
    return std::nullopt;
  }
  TlsPem pem;
  absl::StatusOr<std::string> cert = ReadPemFile("--tls_cert", options.tls_cert_file);
  if (!cert.ok()) return cert.status();
  pem.cert_chain = *std::move(cert);
  absl::StatusOr<std::string> key = ReadPemFile("--tls_key", options.tls_key_file);
  if (!key.ok()) return key.status();
  pem.private_key = *std::move(key);
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile("--tls_client_ca", options.tls_client_ca_file);
    if (!ca.ok()) return ca.status();
    pem.client_ca = *std::move(ca);
  }
  return pem;
}

// gRPC's listening credentials: insecure, TLS, or mutual TLS.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const std::optional<TlsPem>& pem) {
  if (!pem.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({pem->private_key, pem->cert_chain});
  if (pem->client_ca.empty()) {
    ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  } else {
    ssl.pem_root_certs = pem->client_ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// What the Open Inference Protocol's service reads and reports: the
// pipeline's drain and the metrics (oip/ stays below core/).
class PipelineOipState final : public OipServerState {
 public:
  PipelineOipState(const CallPipeline* pipeline, Metrics* metrics)
      : pipeline_(pipeline), metrics_(metrics) {}

  bool draining() const override { return pipeline_->draining(); }
  OipModelTotals Totals(absl::string_view model) const override {
    const Metrics::OpTotals t = metrics_->ReadOpTotals(metrics_->OpIndex(model));
    OipModelTotals o;
    o.success_count = t.success_count;
    o.fail_count = t.fail_count;
    o.success_seconds = t.success_seconds;
    o.fail_seconds = t.fail_seconds;
    o.queue_count = t.queue_count;
    o.queue_seconds = t.queue_seconds;
    o.kernel_count = t.kernel_count;
    o.kernel_seconds = t.kernel_seconds;
    o.last_call_unix_seconds = t.last_call_unix_seconds;
    return o;
  }
  void SetSharedMemoryRegions(int64_t regions) override {
    metrics_->SetSharedMemoryRegions(regions);
  }

 private:
  const CallPipeline* const pipeline_;
  Metrics* const metrics_;
};

}  // namespace

absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--auth_token_file: cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--auth_token_file: ", path, " is empty"));
  }
  if (token.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file: ", path, " must hold one line"));
  }
  return token;
}

int64_t ServerOptions::EffectiveStreamChunkBytes() const {
  return std::min(limits.stream_chunk_bytes, max_message_bytes - kStreamFramingReserveBytes);
}

absl::Status ServerOptions::Validate() const {
  for (int64_t v : {limits.max_rank, limits.max_tensor_elements, limits.max_tensor_bytes,
                    limits.max_request_bytes}) {
    if (v < 0) {
      return absl::InvalidArgumentError(
          "--max_rank, --max_tensor_elements, --max_tensor_bytes and --max_request_bytes must "
          "be >= 0");
    }
  }
  if (grpc_memory_bytes < 0) {
    return absl::InvalidArgumentError("--grpc_memory_bytes must be >= 0");
  }
  if (grpc_max_connections < -1 || grpc_max_connections == 0) {
    return absl::InvalidArgumentError("--grpc_max_connections must be >= 1 (or -1: derived)");
  }
  if (grpc_max_concurrent_streams < 1) {
    return absl::InvalidArgumentError("--grpc_max_concurrent_streams must be >= 1");
  }
  if (grpc_min_ping_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--grpc_min_ping_interval must be >= 0");
  }
  if (http_threads < 0 || http_threads > 64) {
    return absl::InvalidArgumentError("--http_threads must be in 0..64 (0: one per core)");
  }
  if (http_max_connections < -1 || http_max_connections == 0) {
    return absl::InvalidArgumentError("--http_max_connections must be >= 1 (or -1: derived)");
  }
  if (http_header_timeout <= absl::ZeroDuration() || http_idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--http_header_timeout and --http_idle_timeout must be > 0");
  }
  if (http_min_body_rate < 0) {
    return absl::InvalidArgumentError("--http_min_body_rate must be >= 0 (0: no rate check)");
  }
  if (http_body_rate_window < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--http_body_rate_window must be >= 1s");
  }
  if (limits.max_stream_bytes < 0) {
    return absl::InvalidArgumentError("--max_stream_bytes must be >= 0");
  }
  if (EffectiveStreamChunkBytes() < kMinStreamChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream_chunk_bytes must be at least ", kMinStreamChunkBytes,
                     ", and --max_message_bytes at least ", kMinStreamChunkBytes, " + 64 KiB"));
  }
  if (limits.stream_window_bytes < kMinStreamWindowChunks * EffectiveStreamChunkBytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream_window_bytes is ", limits.stream_window_bytes,
                     "; it must be at least ", kMinStreamWindowChunks, " x the stream chunk (",
                     kMinStreamWindowChunks * EffectiveStreamChunkBytes(), " bytes)"));
  }
  // The TLS files are checked (paired, readable) where Start reads them.
  return absl::OkStatus();
}

TensorOpsServer::TensorOpsServer(const ServerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<TensorOpsServer>> TensorOpsServer::Start(
    const ServerOptions& options) {
  if (absl::Status valid = options.Validate(); !valid.ok()) return valid;
  std::unique_ptr<TensorOpsServer> s(new TensorOpsServer(options));
  RegisterBuiltinOps(&s->registry_);
  std::vector<std::string> op_names;
  for (const auto& def : s->registry_.ops()) op_names.push_back(def->spec.name);
  s->metrics_ = std::make_unique<Metrics>(op_names);
  if (options.metrics_port >= 0) {
    absl::StatusOr<int> mport = s->metrics_->StartHttp(options.metrics_host, options.metrics_port);
    if (!mport.ok()) return mport.status();
    s->metrics_port_ = *mport;
  }
  Metrics* metrics = s->metrics_.get();
  s->admission_ = std::make_unique<AdmissionController>(
      options.max_queue, options.max_inflight_bytes,
      [metrics](int64_t inflight, int64_t bytes, int64_t queued) {
        metrics->SetAdmission(inflight, bytes, queued);
      });
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s->pool_ = std::make_unique<ThreadPool>(threads);
  s->metrics_->SetPoolThreads(threads);
  CallPipeline::Options pipeline_options;
  pipeline_options.access_log = options.access_log;
  pipeline_options.min_parallel_bytes = options.min_parallel_bytes;
  pipeline_options.inline_max_bytes = options.inline_max_bytes;
  pipeline_options.limits = options.limits;
  // A chunk plus its message framing must fit in one gRPC message, so a
  // small max_message_bytes alone works.
  pipeline_options.limits.stream_chunk_bytes = options.EffectiveStreamChunkBytes();
  pipeline_options.auth_token = options.auth_token;
  pipeline_options.test_kernel_gate = options.test_kernel_gate;
  s->pipeline_ = std::make_unique<CallPipeline>(&s->registry_, s->pool_.get(), s->admission_.get(),
                                                metrics, pipeline_options);
  s->service_ = std::make_unique<TensorOpsService>(s->pipeline_.get());
  // The Open Inference Protocol: one more front door on the same pipeline.
  ShmRegistry::Options shm_options;
  shm_options.enabled = options.shared_memory;
  shm_options.key_prefix = options.shared_memory_key_prefix;
  s->shm_ = std::make_unique<ShmRegistry>(shm_options);
  s->oip_state_ = std::make_unique<PipelineOipState>(s->pipeline_.get(), metrics);
  OipService::Options oip_options;
  oip_options.tokens_required = !options.auth_token.empty();
  s->oip_ =
      std::make_unique<OipService>(&s->registry_, s->shm_.get(), s->oip_state_.get(), oip_options);
  s->inference_service_ = std::make_unique<InferenceService>(s->pipeline_.get(), s->oip_.get());

  gpr_set_log_function(&GrpcLog);  // process-wide
  if (std::getenv("GRPC_VERBOSITY") == nullptr) {
    g_grpc_info_filtered.store(true);
    gpr_set_log_verbosity(GPR_LOG_SEVERITY_INFO);
  }
  // Both are process-wide switches read by the next ServerBuilder.
  grpc::EnableDefaultHealthCheckService(true);
  // Explicit init: with --as-needed the reflection library's static
  // initialiser would otherwise be dropped (toolchain.md pitfall 1).
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // Referencing the health messages registers their descriptors so
  // reflection can describe grpc.health.v1.Health (pitfall 3).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();

  const std::string address = absl::StrCat(options.host, ":", options.port);
  absl::StatusOr<std::optional<TlsPem>> tls = ReadTlsFiles(options);
  if (!tls.ok()) return tls.status();
  // Built before either door listens, also with HTTP off: OpenSSL checks the
  // files (the chain parses, the key matches it), so a bad one stops the
  // start with an error naming its flag rather than a port gRPC cannot open.
  TlsContext tls_context;
  if (tls->has_value()) {
    absl::StatusOr<TlsContext> context = MakeTlsContext(**tls);
    if (!context.ok()) return context.status();
    tls_context = *std::move(context);
  }
  grpc::ServerBuilder builder;
  // Plaintext connections are accepted by a listener of our own and handed
  // to gRPC (server/grpc/grpc_listener.h: a connection cap, and an accept
  // loop that outlives EMFILE, which gRPC 1.51's does not). gRPC takes only
  // insecure connections that way, so with TLS its own listener accepts.
  const bool own_listener = !tls->has_value();
  const std::shared_ptr<grpc::ServerCredentials> creds = MakeServerCredentials(*tls);
  // Extra addresses (--listen), e.g. a Unix socket for sidecars on this host.
  std::vector<int> extra_ports(options.listen.size(), 0);
  if (!own_listener) {
    builder.AddListeningPort(address, creds, &s->port_);
    for (size_t i = 0; i < options.listen.size(); ++i) {
      builder.AddListeningPort(options.listen[i], creds, &extra_ports[i]);
    }
  }
  // Keepalive pings find dead peers (also idle ones); a maximum connection
  // age makes clients reconnect now and then, so L4 load balancers spread them.
  if (options.keepalive_time > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ClampMs(options.keepalive_time));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (options.keepalive_timeout > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ClampMs(options.keepalive_timeout));
  }
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ClampMs(options.max_connection_age));
  }
  if (options.max_connection_age_grace > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               ClampMs(options.max_connection_age_grace));
  }
  if (options.max_connection_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               ClampMs(options.max_connection_idle));
  }
  // Open streams per connection: without a limit (gRPC's default) a client
  // holding streams open without data costs ~13 KiB each (20 connections x
  // 1,000 streams: +270 MiB). Streams past it are refused (REFUSED_STREAM);
  // gRPC clients queue their calls until a stream ends.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.grpc_max_concurrent_streams);
  // Client pings: closer than this without data in between is a strike, the
  // third strike a GOAWAY (ENHANCE_YOUR_CALM "too_many_pings"), so a ping
  // flood costs one connection, not the server's time. Strikes are gRPC's
  // default (2), set here so that the pair is read in one place.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ClampMs(options.grpc_min_ping_interval));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  const int max_message = static_cast<int>(
      std::min<int64_t>(options.max_message_bytes, std::numeric_limits<int>::max()));
  if (options.grpc_memory_bytes > 0) {
    // In gRPC 1.51 the chttp2 transport takes its read buffers from this
    // quota; near it, flow-control windows shrink, idle connections get a
    // GOAWAY and, past it, streams are cancelled (RESOURCE_EXHAUSTED at the
    // client): what gRPC holds before admission is bounded too.
    grpc::ResourceQuota quota("tensorops");
    quota.Resize(static_cast<size_t>(options.grpc_memory_bytes));
    builder.SetResourceQuota(quota);
  }
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  builder.RegisterService(s->service_.get());
  builder.RegisterService(s->inference_service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || (!own_listener && s->port_ == 0)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  if (own_listener) {
    GrpcListener::Options listener;
    listener.addresses.push_back(address);
    listener.addresses.insert(listener.addresses.end(), options.listen.begin(),
                              options.listen.end());
    listener.max_connections = options.grpc_max_connections;
    if (listener.max_connections == -1) {
      listener.max_connections = FdBudgetFor(CurrentFdLimit()).grpc_max_connections;
    }
    grpc::Server* server = s->server_.get();
    listener.hand_off = [server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); };
    listener.metrics = metrics;
    s->grpc_max_connections_ = listener.max_connections;
    absl::StatusOr<std::unique_ptr<GrpcListener>> started = GrpcListener::Start(listener);
    if (!started.ok()) return started.status();
    s->grpc_listener_ = *std::move(started);
    s->port_ = s->grpc_listener_->port(0);
    for (size_t i = 0; i < options.listen.size(); ++i) {
      extra_ports[i] = s->grpc_listener_->port(i + 1);
    }
  }
  for (size_t i = 0; i < options.listen.size(); ++i) {
    // gRPC's AddListeningPort leaves 0 for an address it could not bind (1
    // for a Unix socket); GrpcListener::Start failed above instead.
    if (!own_listener && extra_ports[i] == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen[i]));
    }
    // The drain ends these transports too (Shutdown, step 3).
    if (absl::StartsWith(options.listen[i], "unix:")) {
      s->extra_unix_paths_.push_back(options.listen[i].substr(5));
    } else if (absl::StartsWith(options.listen[i], "unix-abstract:")) {
      // /proc/net/unix shows an abstract name after '@'.
      s->extra_unix_paths_.push_back(absl::StrCat("@", options.listen[i].substr(14)));
    } else {
      s->extra_tcp_ports_.push_back(extra_ports[i]);
    }
  }
  s->server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  // The Open Inference Protocol's service too (its ServerReady agrees).
  s->server_->GetHealthCheckService()->SetServingStatus("inference.GRPCInferenceService", true);
  if (options.http_port >= 0) {
    HttpServer::Options http_options;
    http_options.host = options.http_host;
    http_options.port = options.http_port;
    http_options.loops = options.http_threads;
    http_options.max_body_bytes = options.max_message_bytes;
    http_options.max_connections = options.http_max_connections;
    if (http_options.max_connections == -1) {
      http_options.max_connections = FdBudgetFor(CurrentFdLimit()).http_max_connections;
    }
    http_options.header_timeout = options.http_header_timeout;
    http_options.idle_timeout = options.http_idle_timeout;
    http_options.min_body_rate = options.http_min_body_rate;
    http_options.body_rate_window = options.http_body_rate_window;
    // With TLS on, HTTPS only, with gRPC's certificate and client CA: bearer
    // tokens and tensors never cross the HTTP port in the clear.
    http_options.tls = tls_context;
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(s->pipeline_.get(), s->oip_.get(), http_options);
    if (!http.ok()) return http.status();
    s->http_ = *std::move(http);
  }
  return s;
}

void TensorOpsServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  Log(LogLevel::kInfo, absl::StrCat("draining: health NOT_SERVING, refusing new requests, ",
                                    admission_->inflight_requests(), " in flight, timeout ",
                                    absl::FormatDuration(options_.drain_timeout)));
  const absl::Time drain_start = absl::Now();
  const absl::Time drain_deadline = drain_start + options_.drain_timeout;
  // 1. Health first, so load balancers stop sending; every new call is
  // answered UNAVAILABLE from now on, and nothing more is admitted.
  server_->GetHealthCheckService()->Shutdown();
  pipeline_->StartDraining();
  admission_->Close();
  // 2. Admitted calls finish. A call counts as admitted until gRPC has handed
  // its last byte to the transport (the reactors' OnDone), so "idle" means
  // every admitted reply has left. At the drain timeout queued calls are
  // answered UNAVAILABLE without running.
  if (!admission_->WaitIdle(drain_deadline)) {
    Log(LogLevel::kWarning, absl::StrCat("drain timeout: dropping ", admission_->queued(),
                                         " queued requests with UNAVAILABLE"));
    pipeline_->AbortQueued();
    admission_->WaitIdle(absl::Now() + kAbortedCallsWait);
  }
  absl::SleepFor(kAnnounceNotServing - (absl::Now() - drain_start));
  // Every admitted HTTP answer has left (the drain waited for its ticket):
  // stop the HTTP door with the transport.
  if (http_ != nullptr) http_->Stop();
  // 3. End the transport before gRPC's own shutdown (server/server_sockets.h):
  // the listener refuses new connections and each connection gets a FIN, so
  // a call that arrives from now on fails at the transport, which the client
  // reports as UNAVAILABLE. grpc::Server::Shutdown with clients still sending
  // would instead cancel what reaches it before they read its GOAWAY
  // (CANCELLED, which no client may see unless it cancelled).
  ServedAddresses served{{port_}, extra_unix_paths_};
  served.tcp_ports.insert(served.tcp_ports.end(), extra_tcp_ports_.begin(), extra_tcp_ports_.end());
  g_listeners_shut.store(true);
  // Our own listener first: its sockets closed, its thread joined, so
  // nothing is handed to gRPC from now on.
  if (grpc_listener_ != nullptr) grpc_listener_->Stop();
  const std::vector<int> listeners = ShutdownListeners(served);
  const absl::Time close_deadline = absl::Now() + kConnectionsCloseWait;
  int open = 0;
  while ((open = ShutdownConnections(served, listeners)) > 0 && absl::Now() < close_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (open > 0) {
    Log(LogLevel::kWarning,
        absl::StrCat(open, " connections still open ", absl::FormatDuration(kConnectionsCloseWait),
                     " after their FIN"));
  }
  // 4. Nothing is connected: gRPC's shutdown has nothing left to cancel. The
  // pool stays up until the server is down because Shutdown waits for every
  // outstanding callback.
  const absl::Time drained = absl::Now();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  Log(LogLevel::kInfo,
      absl::StrCat("drained in ", absl::FormatDuration(drained - drain_start),
                   "; gRPC shutdown took ", absl::FormatDuration(absl::Now() - drained)));
}

void TensorOpsServer::Wait() { server_->Wait(); }

TensorOpsServer::~TensorOpsServer() {
  if (server_ != nullptr) {
    Shutdown();
    server_->Wait();
  }
  // Tasks refer to the service and metrics: stop the pool before them.
  pool_.reset();
}

}  // namespace tensorops
