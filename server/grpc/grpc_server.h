// The gRPC door as one server, as HttpServer (server/http/http_server.h) is
// the HTTP one: credentials, channel arguments (keepalive, connection age and
// idle, streams per connection, ping policy, message size), the memory quota,
// the plaintext listener of our own (server/grpc/grpc_listener.h) and its
// hand-off to gRPC, the extra addresses (--listen), health, reflection and the
// door's drain steps. The assembly (server/server.cc) gives it the services
// and keeps only the order of the drain across doors.
//
// Example:
//   GrpcServer::Options options;
//   options.port = 0;  // a free port
//   options.services = {&tensorops_service, &inference_service};
//   options.health_services = {"tensorops.v1.TensorOps"};
//   ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> grpc, GrpcServer::Start(options));
//   ... grpc->port() ...
//   grpc->StopServing();      // health NOT_SERVING
//   ... wait for admitted calls ...
//   grpc->CloseConnections();  // listeners shut, each connection a FIN
//   grpc->Shutdown();          // gRPC's own shutdown
//
// Thread-safety: Start and the drain steps are for one thread (the
// assembly's); port() and max_connections() are safe anywhere.
#ifndef TENSOROPS_SERVER_GRPC_GRPC_SERVER_H_
#define TENSOROPS_SERVER_GRPC_GRPC_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "wire/limits.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace tensorops {

class GrpcListener;
class Metrics;

class GrpcServer {
 public:
  // The gRPC door's settings, each with its one default (ServerOptions and
  // tensorops-server's flags take theirs from here).
  struct Options {
    std::string host = "127.0.0.1";
    int port = 50051;  // 0 picks a free port
    // More addresses for the same services, as gRPC names them:
    // "unix:/run/x.sock", "127.0.0.1:50052", ... (--listen).
    std::vector<std::string> listen;
    // PEM text (not paths). cert_chain and private_key set: TLS (gRPC's own
    // listener accepts then: AddInsecureChannelFromFd takes plaintext only,
    // so there is no connection cap); client_ca set too: mutual TLS.
    std::string tls_cert_chain;
    std::string tls_private_key;
    std::string tls_client_ca;
    // Largest message either way (also what the HTTP door takes as a body).
    int64_t max_message_bytes = kDefaultMaxMessageBytes;
    // gRPC's memory quota (grpc::ResourceQuota): what the transport may
    // buffer, also for calls not yet admitted; under pressure gRPC shrinks
    // flow-control windows and refuses streams. 0 = gRPC's default (none).
    int64_t memory_bytes = 0;
    // gRPC's BDP probe, which grows each stream's HTTP/2 receive window with
    // the measured bandwidth-delay product; false keeps the window at gRPC's
    // initial size, so the transport holds little per stream (eight
    // flowing streams under a 512 MiB limit need it: docs/reliability.md).
    bool bdp_probe = true;
    // Measurement only (--test_only_grpc_channel_args): more integer channel
    // arguments, applied after all others, for an A/B of a transport setting
    // (bench/grpc_transport_ab.sh). Empty by default.
    std::vector<std::pair<std::string, int>> extra_channel_args;
    // HTTP/2 keepalive and connection lifetime; zero = gRPC's default (off
    // for the max_connection_* ones). Pings find dead peers (idle ones too);
    // an age limit makes clients reconnect now and then, so L4 balancers
    // spread them.
    absl::Duration keepalive_time = absl::Seconds(60);
    absl::Duration keepalive_timeout = absl::Seconds(20);
    absl::Duration max_connection_age = absl::Minutes(5);
    absl::Duration max_connection_age_grace = absl::Seconds(30);
    // Five minutes, as max_connection_age: idle connections (also a flood
    // of them) are closed even when the age limit is turned off.
    absl::Duration max_connection_idle = absl::Minutes(5);
    // At most this many connections open on the plaintext listeners (the
    // port and every --listen address); one more is closed when accepted.
    // 0: no cap (as HttpServer::Options). The assembly derives it from the
    // process's RLIMIT_NOFILE (server/fd_budget.h) unless told a number.
    int64_t max_connections = 0;
    // Streams (calls) one client may have open on one HTTP/2 connection
    // (SETTINGS_MAX_CONCURRENT_STREAMS); stock gRPC clients queue calls past
    // it rather than fail them.
    int max_concurrent_streams = 100;
    // Pings a client sends without data in between closer together than
    // this are strikes; the third gets the connection a GOAWAY
    // (too_many_pings). Clients' keepalive_time must be at least this.
    absl::Duration min_ping_interval = absl::Seconds(10);

    // Not owned; must outlive the server. Registered in this order.
    std::vector<grpc::Service*> services;
    // grpc.health.v1 names marked SERVING once the door listens.
    std::vector<std::string> health_services;
    // Where Start registers the door's connection metrics
    // (RegisterGrpcConnections, grpc_metrics.h); may be null.
    Metrics* metrics = nullptr;
  };

  // The door's rows in `metrics` (its methods, its connections), at zero:
  // the server registers them at start, before /metrics serves; the
  // services and Start register them too (the same handles).
  static void RegisterMetrics(Metrics* metrics);

  // Registers the services (with health and reflection), listens on every
  // address and marks health_services SERVING. UNAVAILABLE naming the address
  // it cannot listen on.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const Options& options);
  ~GrpcServer();  // Shutdown(), then waits for gRPC
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const { return port_; }
  // The connection cap in force; 0 when none (0 asked for, or TLS).
  int64_t max_connections() const { return max_connections_; }

  // Drain, step 1: every health service NOT_SERVING (balancers stop sending).
  void StopServing();
  // Drain, step 3: our listener stops, the listening sockets are shut and
  // each connection gets a FIN (server/grpc/server_sockets.h), waiting up to
  // 2 s for them to close: a call arriving from now on fails at the
  // transport, which a client reports as UNAVAILABLE (gRPC's own shutdown
  // with clients still sending would cancel what reaches it: CANCELLED).
  void CloseConnections();
  // Drain, step 4: gRPC's shutdown (nothing is connected any more, so it has
  // nothing to cancel). Idempotent.
  void Shutdown();
  // Blocks until gRPC has stopped.
  void Wait();

 private:
  GrpcServer() = default;
  // The transports the drain ends: the port, every TCP --listen port and
  // every Unix socket path (abstract ones as "@name").
  void NoteListenAddress(const std::string& address, int port);

  std::unique_ptr<grpc::Server> server_;
  // Accepts the plaintext connections and hands them to server_ (declared
  // after it: destroyed first). Null with TLS.
  std::unique_ptr<GrpcListener> listener_;
  int port_ = 0;
  int64_t max_connections_ = 0;
  std::vector<int> extra_tcp_ports_;
  std::vector<std::string> extra_unix_paths_;
  bool shut_down_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_GRPC_SERVER_H_
