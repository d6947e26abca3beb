// tensorops-server: serves tensorops.v1.TensorOps, grpc.health.v1.Health and
// server reflection on one port.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "kernels/op_registry.h"
#include "server/service.h"

ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address to listen on (use 0.0.0.0 to accept connections from other hosts).");
ABSL_FLAG(int, port, 50051, "gRPC port; 0 picks a free port and prints it.");

namespace {

constexpr char kServiceName[] = "tensorops.v1.TensorOps";

}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  // Our flags live in this file; --help should list them (Abseil matches on
  // the binary name, which has a '-' where this file has a '_').
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tensorops_server");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Serves tensor data-movement ops (Reverse, ReverseSequence, Roll, "
      "onnx.ReverseSequence) over gRPC.\nUsage: tensorops-server [--host=127.0.0.1] "
      "[--port=50051]");
  absl::ParseCommandLine(argc, argv);

  // Block SIGINT/SIGTERM before any thread starts so only the waiter below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  tensorops::OpRegistry registry;
  tensorops::RegisterBuiltinOps(&registry);
  tensorops::TensorOpsService service(&registry);

  grpc::EnableDefaultHealthCheckService(true);
  // Explicit init: with --as-needed the reflection library's static
  // initialiser would otherwise be dropped (toolchain.md pitfall 1).
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // Referencing the health messages registers their descriptors so
  // reflection can describe grpc.health.v1.Health (pitfall 3).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();

  const std::string address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  int bound_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  // Large enough for a 256 MiB tensor plus framing, in and out.
  builder.SetMaxReceiveMessageSize(512 * 1024 * 1024);
  builder.SetMaxSendMessageSize(512 * 1024 * 1024);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::cerr << "tensorops-server: cannot listen on " << address << "\n";
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  std::printf("tensorops-server listening on %s:%d\n", absl::GetFlag(FLAGS_host).c_str(),
              bound_port);
  std::fflush(stdout);

  std::thread waiter([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::printf("tensorops-server: signal %d, shutting down\n", sig);
    std::fflush(stdout);
    server->GetHealthCheckService()->Shutdown();
    server->Shutdown();
  });
  server->Wait();
  waiter.join();
  std::printf("tensorops-server: stopped\n");
  return 0;
}
