// A stand-in gRPC server on 127.0.0.1 for the SDK's tests: a generic
// service (no tensorops code on the server side) that answers every call of
// every method but grpc.health.v1's with one status, counts the Execute calls that reach it and
// records the metadata each call brought (what the SDK sent, seen from the
// server).
//
// Thread-safety: Start and the destructor from the test's thread; the
// accessors from any thread (gRPC's threads record while the test reads).
#ifndef TENSOROPS_TESTS_CLIENT_STAND_IN_SERVER_H_
#define TENSOROPS_TESTS_CLIENT_STAND_IN_SERVER_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tensorops::testing {

// What every stand-in shares: a gRPC generic callback service listening on
// 127.0.0.1:0. A subclass's destructor calls Stop() first, so that no call
// reaches its members while they are destroyed.
class GenericStandIn : public grpc::CallbackGenericService {
 public:
  ~GenericStandIn() override { Stop(); }

  // Listens on 127.0.0.1:0; false if it could not.
  bool Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(this);
    server_ = builder.BuildAndStart();
    return server_ != nullptr && port_ > 0;
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 protected:
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();  // before the service (this) it calls into goes
  }
  grpc::Server* server() const { return server_.get(); }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

class StandInServer final : public GenericStandIn {
 public:
  // One call as the server saw it.
  struct Seen {
    std::string method;  // "/tensorops.v1.TensorOps/Execute"
    std::multimap<std::string, std::string> metadata;
    // The value of metadata `key`, "" if absent; how many times it came.
    std::string Get(const std::string& key) const {
      auto it = metadata.find(key);
      return it == metadata.end() ? std::string() : it->second;
    }
    size_t Count(const std::string& key) const { return metadata.count(key); }
  };

  // Every call ends with `code`; a non-empty `pushback` is sent as
  // grpc-retry-pushback-ms (gRPC's retries read it).
  StandInServer(grpc::StatusCode code, std::string pushback = "")
      : code_(code), pushback_(std::move(pushback)) {}
  ~StandInServer() override { Stop(); }
  // The server's grpc.health.v1 service: null unless
  // grpc::EnableDefaultHealthCheckService(true) was called before Start.
  grpc::HealthCheckServiceInterface* health() const { return server()->GetHealthCheckService(); }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(grpc::StatusCode code) { Finish(grpc::Status(code, "refused by the test")); }
      void OnDone() override { delete this; }
    };
    // The health service is not served (UNIMPLEMENTED, as from a server
    // without it; not recorded): the SDK's client-side health check then
    // counts the server healthy, whatever code its calls get.
    if (ctx->method().rfind("/grpc.health.v1.Health/", 0) == 0) {
      return new Reactor(grpc::StatusCode::UNIMPLEMENTED);
    }
    if (ctx->method() == "/tensorops.v1.TensorOps/Execute") ++calls_;
    Seen seen;
    seen.method = ctx->method();
    for (const auto& [key, value] : ctx->client_metadata()) {
      seen.metadata.emplace(std::string(key.data(), key.size()),
                            std::string(value.data(), value.size()));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(std::move(seen));
    }
    if (!pushback_.empty()) ctx->AddTrailingMetadata("grpc-retry-pushback-ms", pushback_);
    return new Reactor(code_);
  }

  // Execute calls (attempts) that reached the server.
  int calls() const { return calls_.load(); }
  // Every call of any method so far, in arrival order.
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  const grpc::StatusCode code_;
  const std::string pushback_;
  std::atomic<int> calls_{0};
  mutable std::mutex mu_;
  std::vector<Seen> seen_;  // guarded by mu_
};

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_CLIENT_STAND_IN_SERVER_H_
