// The whole tensorops server: the kernel pool, admission control, the
// metrics endpoint and two doors, gRPC (server/grpc/grpc_server.h: TensorOps,
// the Open Inference Protocol, health, reflection) and HTTP/REST
// (server/http/http_server.h), with a graceful drain across both. Used by
// main and by in-process tests.
//
// Thread-safety: Shutdown() may be called from any thread, once; port
// accessors are safe anywhere.
#ifndef TENSOROPS_SERVER_SERVER_H_
#define TENSOROPS_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/core/admission.h"
#include "server/core/call.h"
#include "server/core/metrics.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/inference_service.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"
#include "server/http/tls_context.h"
#include "server/oip/oip_service.h"
#include "server/oip/shm_registry.h"
#include "wire/limits.h"

namespace tensorops {

// Every setting of a server, with its one default (tensorops-server's flags
// take their defaults from here). Start() calls Validate(), so tests and
// embedders get the same checks as the binary.
struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 50051;  // 0 picks a free port
  // More addresses to serve on, as gRPC names them: "unix:/run/x.sock",
  // "127.0.0.1:50052", ... (--listen).
  std::vector<std::string> listen;
  // System shared memory for the Open Inference Protocol (--shared_memory=system);
  // off by default.
  bool shared_memory = false;
  std::string shared_memory_key_prefix;
  int threads = 0;  // kernel pool size; 0 = hardware threads
  int64_t max_queue = 1024;
  int64_t max_inflight_bytes = int64_t{8} << 30;
  // gRPC's memory quota (grpc::ResourceQuota): what the transport may
  // buffer, also for calls not yet admitted; under pressure gRPC shrinks
  // flow-control windows and refuses streams. 0 = gRPC's default (no quota).
  int64_t grpc_memory_bytes = GrpcServer::Options().memory_bytes;
  int64_t max_message_bytes = kDefaultMaxMessageBytes;
  std::string metrics_host = "127.0.0.1";
  int metrics_port = 9464;  // 0 picks a free port; -1 disables the endpoint
  // The Open Inference Protocol over HTTP/REST (server/http/). Off here so
  // that embedders and in-process tests never collide on a fixed port;
  // tensorops-server's --http_port defaults to 8000.
  std::string http_host = "127.0.0.1";
  int http_port = -1;    // 0 picks a free port; -1 disables it; HTTPS only with TLS on
  int http_threads = 0;  // its event-loop threads; 0: one per core, at most 4
  // Its connection cap, deadlines and body rate (HttpServer::Options says
  // what each does). http_max_connections -1 = derived from the process's
  // RLIMIT_NOFILE (server/fd_budget.h).
  int64_t http_max_connections = -1;
  absl::Duration http_header_timeout = HttpServer::Options().header_timeout;
  absl::Duration http_idle_timeout = HttpServer::Options().idle_timeout;
  int64_t http_min_body_rate = HttpServer::Options().min_body_rate;  // bytes/s; 0 = off
  absl::Duration http_body_rate_window = HttpServer::Options().body_rate_window;
  absl::Duration drain_timeout = absl::Seconds(10);
  bool access_log = false;
  // When to send a call's traceparent back and its Server-Timing (gRPC
  // initial and trailing metadata, HTTP response headers); --trace_headers.
  // Its one default (auto: to callers that trace) is CallPipeline::Options's.
  TraceHeaders trace_headers = CallPipeline::Options().trace_headers;
  // An OTLP/HTTP collector ("http://HOST:4318"): every sampled call's span
  // goes there in batches (server/core/span_export.h). Empty: none.
  std::string otlp_endpoint;
  int64_t min_parallel_bytes = kDefaultMinParallelBytes;
  int64_t inline_max_bytes = kDefaultInlineMaxBytes;  // see CallPipeline::Options
  // --max_rank, --max_tensor_elements, --max_tensor_bytes, --max_request_bytes,
  // --max_stream_bytes, --stream_chunk_bytes.
  RequestLimits limits;
  // Tests only: see CallPipeline::Options::test_kernel_gate.
  std::string test_kernel_gate;
  // Transport security (all PEM file paths; empty = off). tls_cert_file and
  // tls_key_file together turn on TLS on the gRPC and HTTP ports (HTTPS);
  // tls_client_ca_file (needs TLS) also requires and verifies a client
  // certificate signed by that CA (mTLS) on both.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Bearer token every tensorops.v1.TensorOps call must carry as
  // "authorization: Bearer <token>" (health and reflection stay open); empty = off.
  std::string auth_token;
  // The gRPC door's connections: keepalive, lifetime, streams and pings
  // (GrpcServer::Options says what each does). grpc_max_connections -1 =
  // derived from the process's RLIMIT_NOFILE (server/fd_budget.h); with TLS
  // gRPC's own listener accepts and there is no cap (docs/reliability.md).
  absl::Duration keepalive_time = GrpcServer::Options().keepalive_time;
  absl::Duration keepalive_timeout = GrpcServer::Options().keepalive_timeout;
  absl::Duration max_connection_age = GrpcServer::Options().max_connection_age;
  absl::Duration max_connection_age_grace = GrpcServer::Options().max_connection_age_grace;
  absl::Duration max_connection_idle = GrpcServer::Options().max_connection_idle;
  int64_t grpc_max_connections = -1;
  int grpc_max_concurrent_streams = GrpcServer::Options().max_concurrent_streams;
  absl::Duration grpc_min_ping_interval = GrpcServer::Options().min_ping_interval;

  // INVALID_ARGUMENT naming the flag when a setting cannot work: a negative
  // size limit, a stream chunk below 4096 bytes once capped to fit a message
  // (max_message_bytes minus the 64 KiB framing reserve). Files are not
  // checked here: Start reads them (TLS, and its pairing rules).
  absl::Status Validate() const;
  // The chunk size a server with these options uses: stream_chunk_bytes,
  // capped so that a chunk and its framing fit in one message.
  int64_t EffectiveStreamChunkBytes() const;
};

// Reads a bearer token file for ServerOptions::auth_token: trailing CR/LF
// (and spaces) are dropped; a missing, unreadable or empty file is an error.
// Errors name the file, never its contents.
absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path);

class TensorOpsServer {
 public:
  static absl::StatusOr<std::unique_ptr<TensorOpsServer>> Start(const ServerOptions& options);
  ~TensorOpsServer();

  int port() const { return grpc_->port(); }
  int metrics_port() const { return metrics_port_; }                       // -1 when disabled
  int http_port() const { return http_ != nullptr ? http_->port() : -1; }  // -1 when disabled
  // The HTTP door's connection cap in force (0: none; -1: no HTTP door).
  int64_t http_max_connections() const { return http_ != nullptr ? http_->max_connections() : -1; }
  // The gRPC door's connection cap in force; 0 when none (TLS).
  int64_t grpc_max_connections() const { return grpc_->max_connections(); }
  int threads() const { return pool_->num_threads(); }

  // Graceful stop: health turns NOT_SERVING, new requests get UNAVAILABLE,
  // admitted ones finish (up to the drain timeout; queued ones still waiting
  // then are dropped with UNAVAILABLE), then the gRPC server stops.
  void Shutdown();
  // Blocks until the gRPC server has stopped.
  void Wait();

 private:
  explicit TensorOpsServer(const ServerOptions& options);
  // Each door's options from options_ (derived caps resolved).
  GrpcServer::Options GrpcOptions(const std::optional<TlsPem>& tls, Metrics* metrics) const;
  HttpServer::Options HttpOptions(const TlsContext& tls) const;

  ServerOptions options_;
  OpRegistry registry_;
  std::unique_ptr<Metrics> metrics_;
  // --otlp_endpoint's exporter, or null. Before the pipeline: outlives it.
  std::unique_ptr<SpanExporter> spans_;
  std::unique_ptr<AdmissionController> admission_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CallPipeline> pipeline_;
  std::unique_ptr<TensorOpsService> service_;
  std::unique_ptr<ShmRegistry> shm_;
  std::unique_ptr<OipServerState> oip_state_;
  std::unique_ptr<OipService> oip_;  // both doors' control endpoints
  std::unique_ptr<InferenceService> inference_service_;
  // The doors. http_ is null when the HTTP port is off.
  std::unique_ptr<GrpcServer> grpc_;
  std::unique_ptr<HttpServer> http_;
  int metrics_port_ = -1;
  bool shut_down_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_SERVER_H_
