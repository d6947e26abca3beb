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
#include "server/metrics_http/metrics_http.h"
#include "server/oip/oip_service.h"
#include "server/oip/shm_registry.h"
#include "wire/limits.h"

namespace tensorops {

// Every setting of a server: each door's Options and the call pipeline's,
// each with its one default in its own room, and the assembly's own.
// tensorops-server's flags take their defaults from here. Start() calls
// Validate(), so tests and embedders get the same checks as the binary.
struct ServerOptions {
  // The gRPC door (GrpcServer::Options says what each does): --host, --port,
  // --listen, --max_message_bytes (also the HTTP door's body limit),
  // --grpc_memory_bytes, keepalive and connection lifetime,
  // --grpc_max_connections, --grpc_max_concurrent_streams,
  // --grpc_min_ping_interval. Start fills in its TLS (from the files
  // below), services, health names and metrics. Here max_connections -1
  // (the default) is derived from the process's RLIMIT_NOFILE
  // (server/fd_budget.h); with TLS gRPC's own listener accepts and there is
  // no cap (docs/reliability.md).
  GrpcServer::Options grpc = DefaultGrpc();
  // The HTTP/REST door (HttpServer::Options): --http_host, --http_port,
  // --http_threads (its loops), --http_max_connections and the
  // --http_*_timeout, --http_min_body_rate, --http_body_rate_window. Start
  // sets its body limit (grpc.max_message_bytes) and TLS. Here port -1: off,
  // so that embedders and in-process tests never collide on a fixed port
  // (tensorops-server's --http_port defaults to HttpServer::Options's);
  // max_connections -1: derived, as the gRPC door's.
  HttpServer::Options http = DefaultHttp();
  // The call pipeline (CallPipeline::Options): --access_log,
  // --trace_headers, --min_parallel_bytes, --inline_max_bytes, the request
  // limits (--max_rank, --max_tensor_elements, --max_tensor_bytes,
  // --max_request_bytes, --max_stream_bytes, --stream_chunk_bytes,
  // --stream_window_bytes), the bearer token every call must carry (empty:
  // off), the tests' kernel gate. Start sets its span exporter and caps its
  // stream chunk to fit a message (EffectiveStreamChunkBytes).
  CallPipeline::Options call;

  // System shared memory for the Open Inference Protocol (--shared_memory=system);
  // off by default.
  bool shared_memory = false;
  std::string shared_memory_key_prefix;
  int threads = 0;  // kernel pool size; 0 = hardware threads
  int64_t max_queue = 1024;
  int64_t max_inflight_bytes = int64_t{8} << 30;
  std::string metrics_host = "127.0.0.1";
  int metrics_port = 9464;  // 0 picks a free port; -1 disables the endpoint
  absl::Duration drain_timeout = absl::Seconds(10);
  // An OTLP/HTTP collector ("http://HOST:4318"): every sampled call's span
  // goes there in batches (server/core/span_export.h). Empty: none.
  std::string otlp_endpoint;
  // Transport security (all PEM file paths; empty = off). tls_cert_file and
  // tls_key_file together turn on TLS on the gRPC and HTTP ports (HTTPS);
  // tls_client_ca_file (needs TLS) also requires and verifies a client
  // certificate signed by that CA (mTLS) on both.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;

  // The doors' defaults as a server has them (above): their own, but for
  // the derived connection caps and the HTTP door off.
  static GrpcServer::Options DefaultGrpc();
  static HttpServer::Options DefaultHttp();

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
  // Each door's options from options_ (derived caps resolved, TLS and the
  // rest Start knows filled in).
  absl::StatusOr<CallPipeline::Options> PipelineOptions(Metrics* metrics);
  GrpcServer::Options GrpcOptions(const std::optional<TlsPem>& tls, Metrics* metrics) const;
  HttpServer::Options HttpOptions(const TlsContext& tls) const;

  ServerOptions options_;
  OpRegistry registry_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // GET /metrics, or null
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
