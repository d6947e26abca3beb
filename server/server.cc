#include "server/server.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/logging.h"
#include "server/fd_budget.h"
#include "server/http/otlp_client.h"
#include "server/http/tls_context.h"

namespace tensorops {
namespace {

constexpr char kServiceName[] = "tensorops.v1.TensorOps";
// The drain (see Shutdown): how long health watchers get to read NOT_SERVING
// before the connections close; how long calls dropped at the drain timeout
// get to send their UNAVAILABLE.
constexpr absl::Duration kAnnounceNotServing = absl::Milliseconds(100);
constexpr absl::Duration kAbortedCallsWait = absl::Seconds(1);

absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  return ss.str();
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

GrpcServer::Options ServerOptions::DefaultGrpc() {
  GrpcServer::Options g;
  g.max_connections = -1;  // derived (fd_budget.h)
  return g;
}

HttpServer::Options ServerOptions::DefaultHttp() {
  HttpServer::Options h;
  h.port = -1;             // off
  h.max_connections = -1;  // derived (fd_budget.h)
  return h;
}

int64_t ServerOptions::EffectiveStreamChunkBytes() const {
  return std::min(call.limits.stream_chunk_bytes,
                  grpc.max_message_bytes - kStreamFramingReserveBytes);
}

absl::Status ServerOptions::Validate() const {
  for (int64_t v : {call.limits.max_rank, call.limits.max_tensor_elements,
                    call.limits.max_tensor_bytes, call.limits.max_request_bytes}) {
    if (v < 0) {
      return absl::InvalidArgumentError(
          "--max_rank, --max_tensor_elements, --max_tensor_bytes and --max_request_bytes must "
          "be >= 0");
    }
  }
  if (grpc.memory_bytes < 0) {
    return absl::InvalidArgumentError("--grpc_memory_bytes must be >= 0");
  }
  if (grpc.max_connections < -1 || grpc.max_connections == 0) {
    return absl::InvalidArgumentError("--grpc_max_connections must be >= 1 (or -1: derived)");
  }
  if (grpc.max_concurrent_streams < 1) {
    return absl::InvalidArgumentError("--grpc_max_concurrent_streams must be >= 1");
  }
  if (grpc.min_ping_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--grpc_min_ping_interval must be >= 0");
  }
  if (http.loops < 0 || http.loops > 64) {
    return absl::InvalidArgumentError("--http_threads must be in 0..64 (0: one per core)");
  }
  if (http.max_connections < -1 || http.max_connections == 0) {
    return absl::InvalidArgumentError("--http_max_connections must be >= 1 (or -1: derived)");
  }
  if (http.header_timeout <= absl::ZeroDuration() || http.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--http_header_timeout and --http_idle_timeout must be > 0");
  }
  if (http.min_body_rate < 0) {
    return absl::InvalidArgumentError("--http_min_body_rate must be >= 0 (0: no rate check)");
  }
  if (http.body_rate_window < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--http_body_rate_window must be >= 1s");
  }
  if (call.budget_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--budget_wait must be >= 0 (0: refused at once)");
  }
  if (call.limits.max_stream_bytes < 0) {
    return absl::InvalidArgumentError("--max_stream_bytes must be >= 0");
  }
  if (EffectiveStreamChunkBytes() < kMinStreamChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream_chunk_bytes must be at least ", kMinStreamChunkBytes,
                     ", and --max_message_bytes at least ", kMinStreamChunkBytes, " + 64 KiB"));
  }
  if (call.limits.stream_window_bytes < kMinStreamWindowChunks * EffectiveStreamChunkBytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream_window_bytes is ", call.limits.stream_window_bytes,
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
  // Each door's rows (methods, connections), at zero before /metrics serves
  // and also for a door that is off: core/ names no door.
  GrpcServer::RegisterMetrics(s->metrics_.get());
  HttpServer::RegisterMetrics(s->metrics_.get());
  if (options.metrics_port >= 0) {
    s->metrics_http_ = std::make_unique<MetricsHttpServer>(s->metrics_->registry());
    absl::StatusOr<int> mport = s->metrics_http_->Start(options.metrics_host, options.metrics_port);
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
  absl::StatusOr<CallPipeline::Options> pipeline_options = s->PipelineOptions(metrics);
  if (!pipeline_options.ok()) return pipeline_options.status();
  s->pipeline_ = std::make_unique<CallPipeline>(&s->registry_, s->pool_.get(), s->admission_.get(),
                                                metrics, *pipeline_options);
  s->service_ = std::make_unique<TensorOpsService>(s->pipeline_.get());
  // The Open Inference Protocol: one more front door on the same pipeline.
  ShmRegistry::Options shm_options;
  shm_options.enabled = options.shared_memory;
  shm_options.key_prefix = options.shared_memory_key_prefix;
  s->shm_ = std::make_unique<ShmRegistry>(shm_options);
  s->oip_state_ = std::make_unique<PipelineOipState>(s->pipeline_.get(), metrics);
  OipService::Options oip_options;
  oip_options.tokens_required = !options.call.auth_token.empty();
  s->oip_ =
      std::make_unique<OipService>(&s->registry_, s->shm_.get(), s->oip_state_.get(), oip_options);
  s->inference_service_ = std::make_unique<InferenceService>(s->pipeline_.get(), s->oip_.get());

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
  absl::StatusOr<std::unique_ptr<GrpcServer>> grpc =
      GrpcServer::Start(s->GrpcOptions(*tls, metrics));
  if (!grpc.ok()) return grpc.status();
  s->grpc_ = *std::move(grpc);
  if (options.http.port >= 0) {
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(s->pipeline_.get(), s->oip_.get(), s->HttpOptions(tls_context));
    if (!http.ok()) return http.status();
    s->http_ = *std::move(http);
  }
  return s;
}

// The call pipeline's options: the server's, with the span exporter that
// --otlp_endpoint and the OTEL_* variables ask for (made here, owned by the
// server) and the stream chunk size the message limit allows.
absl::StatusOr<CallPipeline::Options> TensorOpsServer::PipelineOptions(Metrics* metrics) {
  CallPipeline::Options pipeline_options = options_.call;
  absl::StatusOr<OtlpSettings> otlp = OtlpSettingsFrom(options_.otlp_endpoint, ProcessEnv);
  if (!otlp.ok()) return otlp.status();
  pipeline_options.sampler = otlp->sampler;
  if (otlp->target.has_value()) {
    SpanExporter::Options exporter;
    exporter.encoding = otlp->encoding;
    exporter.resource.service_name = otlp->service_name;
    exporter.resource.instance_id = NewInstanceId();
    spans_ = std::make_unique<SpanExporter>(std::move(exporter),
                                            OtlpHttpPost(*std::move(otlp->target)), metrics);
    pipeline_options.spans = spans_.get();
  }
  // A chunk plus its message framing must fit in one gRPC message, so a
  // small max_message_bytes alone works.
  pipeline_options.limits.stream_chunk_bytes = options_.EffectiveStreamChunkBytes();
  return pipeline_options;
}

GrpcServer::Options TensorOpsServer::GrpcOptions(const std::optional<TlsPem>& tls,
                                                 Metrics* metrics) const {
  GrpcServer::Options g = options_.grpc;
  if (tls.has_value()) {
    g.tls_cert_chain = tls->cert_chain;
    g.tls_private_key = tls->private_key;
    g.tls_client_ca = tls->client_ca;
  }
  if (g.max_connections == -1)
    g.max_connections = FdBudgetFor(CurrentFdLimit()).grpc_max_connections;
  g.services = {service_.get(), inference_service_.get()};
  // The Open Inference Protocol's service too (its ServerReady agrees).
  g.health_services = {kServiceName, "inference.GRPCInferenceService"};
  g.metrics = metrics;
  return g;
}

HttpServer::Options TensorOpsServer::HttpOptions(const TlsContext& tls) const {
  HttpServer::Options h = options_.http;
  // One message limit for both doors: a body is a message.
  h.max_body_bytes = options_.grpc.max_message_bytes;
  if (h.max_connections == -1)
    h.max_connections = FdBudgetFor(CurrentFdLimit()).http_max_connections;
  // With TLS on, HTTPS only, with gRPC's certificate and client CA: bearer
  // tokens and tensors never cross the HTTP port in the clear.
  h.tls = tls;
  return h;
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
  grpc_->StopServing();
  pipeline_->StartDraining();
  admission_->Close();
  // 2. Admitted calls finish. A call counts as admitted until its door has
  // handed its last byte to the transport (the gRPC reactors' OnDone), so
  // "idle" means every admitted reply has left. At the drain timeout queued
  // calls are answered UNAVAILABLE without running.
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
  // 3. End the gRPC transport before gRPC's own shutdown: a call that
  // arrives from now on fails at the transport (UNAVAILABLE at the client),
  // never CANCELLED (GrpcServer::CloseConnections says why).
  grpc_->CloseConnections();
  // 4. Nothing is connected: gRPC's shutdown has nothing left to cancel. The
  // pool stays up until the server is down because Shutdown waits for every
  // outstanding callback.
  const absl::Time drained = absl::Now();
  grpc_->Shutdown();
  Log(LogLevel::kInfo,
      absl::StrCat("drained in ", absl::FormatDuration(drained - drain_start),
                   "; gRPC shutdown took ", absl::FormatDuration(absl::Now() - drained)));
}

void TensorOpsServer::Wait() { grpc_->Wait(); }

TensorOpsServer::~TensorOpsServer() {
  if (grpc_ != nullptr) {
    Shutdown();
    grpc_->Wait();
  }
  // Tasks refer to the service and metrics: stop the pool before them.
  pool_.reset();
}

}  // namespace tensorops
