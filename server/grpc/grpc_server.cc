#include "server/grpc/grpc_server.h"

#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.pb.h"
#include "server/core/logging.h"
#include "server/grpc/grpc_listener.h"
#include "server/grpc/grpc_metrics.h"
#include "server/grpc/server_sockets.h"

namespace tensorops {
namespace {

// How long gRPC gets to close connections after their FIN (the drain's
// step 3).
constexpr absl::Duration kConnectionsCloseWait = absl::Seconds(2);

// Set once a drain has shut a listener down (CloseConnections).
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

// Process-wide gRPC switches, read by the next ServerBuilder: the log
// function, health and reflection.
void SetUpGrpcProcess() {
  gpr_set_log_function(&GrpcLog);
  if (std::getenv("GRPC_VERBOSITY") == nullptr) {
    g_grpc_info_filtered.store(true);
    gpr_set_log_verbosity(GPR_LOG_SEVERITY_INFO);
  }
  grpc::EnableDefaultHealthCheckService(true);
  // Explicit init: with --as-needed the reflection library's static
  // initialiser would otherwise be dropped (toolchain.md pitfall 1).
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // Referencing the health messages registers their descriptors so
  // reflection can describe grpc.health.v1.Health (pitfall 3).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
}

int ClampMs(absl::Duration d) {
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(d), std::numeric_limits<int>::max()));
}

// gRPC's listening credentials: insecure, TLS, or mutual TLS.
std::shared_ptr<grpc::ServerCredentials> MakeCredentials(const GrpcServer::Options& options) {
  if (options.tls_cert_chain.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({options.tls_private_key, options.tls_cert_chain});
  if (options.tls_client_ca.empty()) {
    ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  } else {
    ssl.pem_root_certs = options.tls_client_ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// The channel arguments every connection gets: keepalive, connection age and
// idle, streams per connection, the ping policy, message sizes, the quota.
void ApplyChannelArguments(const GrpcServer::Options& options, grpc::ServerBuilder* builder) {
  if (options.keepalive_time > absl::ZeroDuration()) {
    builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ClampMs(options.keepalive_time));
    builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (options.keepalive_timeout > absl::ZeroDuration()) {
    builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ClampMs(options.keepalive_timeout));
  }
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                                ClampMs(options.max_connection_age));
  }
  if (options.max_connection_age_grace > absl::ZeroDuration()) {
    builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                                ClampMs(options.max_connection_age_grace));
  }
  if (options.max_connection_idle > absl::ZeroDuration()) {
    builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                                ClampMs(options.max_connection_idle));
  }
  // Open streams per connection: without a limit (gRPC's default) a client
  // holding streams open without data costs ~13 KiB each (20 connections x
  // 1,000 streams: +270 MiB). Streams past it are refused (REFUSED_STREAM);
  // gRPC clients queue their calls until a stream ends.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // Client pings: closer than this without data in between is a strike, the
  // third strike a GOAWAY (ENHANCE_YOUR_CALM "too_many_pings"), so a ping
  // flood costs one connection, not the server's time. Strikes are gRPC's
  // default (2), set here so that the pair is read in one place.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              ClampMs(options.min_ping_interval));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  // No server-side deadline timer in gRPC core: in gRPC 1.51 it answers a
  // call whose deadline passes with a trailers-only HEADERS (END_STREAM) and
  // RST_STREAM, and then, when a second cancellation of the call reaches the
  // transport, with the same pair again on the closed stream (chttp2's
  // close_from_api runs once per cancellation: it does not mark the
  // trailers sent, and grpc_chttp2_cancel_stream does not check that the
  // stream is closed; upstream fixed it after 1.51, grpc/grpc#34565
  // "Dont double-close closed streams"). Both come from core, not from the
  // handler: with the request still arriving, the deadline filter's cancel
  // reaches the transport twice before the handler ever runs; with the
  // handler running, the second is the CANCELLED that gRPC sends when it
  // releases the call after the handler's Finish, whatever that Finish sends.
  // HAProxy 2.6 takes a frame after END_STREAM for a connection error:
  // GOAWAY(STREAM_CLOSED) to the replica, and every other call on that
  // backend connection is dropped (a big one cannot be resent). Without the
  // timer a call ends once: at its client's cancel (a client, and HAProxy
  // for it, sends RST_STREAM(CANCEL) at its deadline, which cancels the call
  // here as before), or with the handler's answer. The deadline still
  // counts: it is read from grpc-timeout either way (ctx->deadline()), and
  // Call::CheckDrop does not run a kernel whose deadline passed. What the
  // timer did that nothing here does: end a call whose client sends part of
  // a request, then neither the rest nor a cancel (a broken client: every
  // stock one cancels at its deadline); --max_connection_age and its grace
  // end it (5.5 minutes by default), and gRPC's memory quota bounds what it
  // holds until then.
  // tests/e2e/deadline_rst_python_test.py checks the wire.
  builder->AddChannelArgument(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 0);
  if (!options.bdp_probe) builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  if (options.memory_bytes > 0) {
    // In gRPC 1.51 the chttp2 transport takes its read buffers from this
    // quota; near it, flow-control windows shrink, idle connections get a
    // GOAWAY and, past it, streams are cancelled (RESOURCE_EXHAUSTED at the
    // client): what gRPC holds before admission is bounded too.
    grpc::ResourceQuota quota("tensorops");
    quota.Resize(static_cast<size_t>(options.memory_bytes));
    builder->SetResourceQuota(quota);
  }
  const int max_message = static_cast<int>(
      std::min<int64_t>(options.max_message_bytes, std::numeric_limits<int>::max()));
  builder->SetMaxReceiveMessageSize(max_message);
  builder->SetMaxSendMessageSize(max_message);
  for (const auto& [name, value] : options.extra_channel_args) {
    builder->AddChannelArgument(name, value);
  }
}

}  // namespace

void GrpcServer::RegisterMetrics(Metrics* metrics) {
  GrpcMethods::Register(metrics);
  RegisterGrpcConnections(metrics);
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const Options& options) {
  SetUpGrpcProcess();
  // The door's connection metrics, on /metrics also with TLS (at zero).
  const ConnectionMetrics* connections =
      options.metrics != nullptr ? RegisterGrpcConnections(options.metrics) : nullptr;
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  const std::string address = absl::StrCat(options.host, ":", options.port);
  grpc::ServerBuilder builder;
  // Plaintext connections are accepted by a listener of our own and handed
  // to gRPC (server/grpc/grpc_listener.h: a connection cap, and an accept
  // loop that outlives EMFILE, which gRPC 1.51's does not). gRPC takes only
  // insecure connections that way, so with TLS its own listener accepts.
  const bool own_listener = options.tls_cert_chain.empty();
  std::vector<int> extra_ports(options.listen.size(), 0);
  if (!own_listener) {
    const std::shared_ptr<grpc::ServerCredentials> creds = MakeCredentials(options);
    builder.AddListeningPort(address, creds, &s->port_);
    for (size_t i = 0; i < options.listen.size(); ++i) {
      builder.AddListeningPort(options.listen[i], creds, &extra_ports[i]);
    }
  }
  ApplyChannelArguments(options, &builder);
  for (grpc::Service* service : options.services) builder.RegisterService(service);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || (!own_listener && s->port_ == 0)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  if (own_listener) {
    GrpcListener::Options listener;
    listener.addresses.push_back(address);
    listener.addresses.insert(listener.addresses.end(), options.listen.begin(),
                              options.listen.end());
    listener.max_connections =
        options.max_connections > 0 ? options.max_connections : std::numeric_limits<int64_t>::max();
    grpc::Server* server = s->server_.get();
    listener.hand_off = [server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); };
    listener.connections = connections;
    absl::StatusOr<std::unique_ptr<GrpcListener>> started = GrpcListener::Start(listener);
    if (!started.ok()) return started.status();
    s->listener_ = *std::move(started);
    s->max_connections_ = std::max<int64_t>(0, options.max_connections);
    s->port_ = s->listener_->port(0);
    for (size_t i = 0; i < options.listen.size(); ++i) {
      extra_ports[i] = s->listener_->port(i + 1);
    }
  }
  for (size_t i = 0; i < options.listen.size(); ++i) {
    // gRPC's AddListeningPort leaves 0 for an address it could not bind (1
    // for a Unix socket); GrpcListener::Start failed above instead.
    if (!own_listener && extra_ports[i] == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen[i]));
    }
    s->NoteListenAddress(options.listen[i], extra_ports[i]);
  }
  for (const std::string& name : options.health_services) {
    s->server_->GetHealthCheckService()->SetServingStatus(name, true);
  }
  return s;
}

void GrpcServer::NoteListenAddress(const std::string& address, int port) {
  if (absl::StartsWith(address, "unix:")) {
    extra_unix_paths_.push_back(address.substr(5));
  } else if (absl::StartsWith(address, "unix-abstract:")) {
    // /proc/net/unix shows an abstract name after '@'.
    extra_unix_paths_.push_back(absl::StrCat("@", address.substr(14)));
  } else {
    extra_tcp_ports_.push_back(port);
  }
}

void GrpcServer::StopServing() { server_->GetHealthCheckService()->Shutdown(); }

void GrpcServer::CloseConnections() {
  ServedAddresses served{{port_}, extra_unix_paths_};
  served.tcp_ports.insert(served.tcp_ports.end(), extra_tcp_ports_.begin(), extra_tcp_ports_.end());
  g_listeners_shut.store(true);
  // Our own listener first: its sockets closed, its thread joined, so
  // nothing is handed to gRPC from now on.
  if (listener_ != nullptr) listener_->Stop();
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
}

void GrpcServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
}

void GrpcServer::Wait() { server_->Wait(); }

GrpcServer::~GrpcServer() {
  if (server_ == nullptr) return;
  Shutdown();
  server_->Wait();
}

}  // namespace tensorops
