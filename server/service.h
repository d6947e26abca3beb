// tensorops.v1.TensorOps over gRPC's callback API.
//
// Execute: the handler decodes and validates on the gRPC thread (cheap),
// passes admission control, then hands the work to the kernel thread pool and
// returns. A pool worker drops the request if it was cancelled or its deadline
// passed while queued, else runs the kernel (split across the pool when large),
// encodes the reply and finishes the RPC. gRPC's threads never run kernels.
//
// Thread-safety: safe for concurrent RPCs.
#ifndef TENSOROPS_SERVER_SERVICE_H_
#define TENSOROPS_SERVER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/admission.h"
#include "server/limits.h"
#include "server/metrics.h"
#include "server/stream_execution.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

namespace tensorops {

class TensorOpsService final : public v1::TensorOps::CallbackService {
 public:
  struct Options {
    bool access_log = false;  // one log line per request
    // Output size from which one request is split across the pool.
    int64_t min_parallel_bytes = int64_t{1} << 20;
    // Outputs smaller than this run on the gRPC thread that received the
    // request instead of the pool; 0 (the default) keeps every kernel on the pool.
    int64_t inline_max_bytes = 0;
    RequestLimits limits;  // per-request size limits, ExecuteStream's too (server/limits.h)
    // Non-empty: every call must carry "authorization: Bearer <auth_token>",
    // else UNAUTHENTICATED.
    std::string auth_token;
  };

  // None of the pointers is owned; all must outlive the service.
  TensorOpsService(const OpRegistry* registry, ThreadPool* pool,
                   AdmissionController* admission, Metrics* metrics, Options options);

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx,
                                    const v1::ExecuteRequest* request,
                                    v1::ExecuteResponse* response) override;
  grpc::ServerUnaryReactor* ListOps(grpc::CallbackServerContext* ctx,
                                    const v1::ListOpsRequest* request,
                                    v1::ListOpsResponse* response) override;
  // Streamed calls: see ExecuteStreamReactor (server/stream_reactor.cc).
  grpc::ServerBidiReactor<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>* ExecuteStream(
      grpc::CallbackServerContext* ctx) override;

  // Drain, step 1: new requests are refused with UNAVAILABLE from now on.
  void StartDraining() { draining_.store(true); }
  // Drain, step 2 (drain timeout passed): queued requests are dropped with
  // UNAVAILABLE instead of running.
  void AbortQueued() { aborting_.store(true); }

 private:
  friend class ExecuteStreamReactor;

  const OpRegistry* registry_;
  ThreadPool* pool_;
  AdmissionController* admission_;
  Metrics* metrics_;
  const Options options_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> aborting_{false};
  // "Bearer <token>", built once (empty when no token is configured).
  const std::string expected_authorization_;

  // OK when no token is configured or the call carries the right one
  // (compared in constant time); else UNAUTHENTICATED.
  grpc::Status CheckAuth(const grpc::CallbackServerContext* ctx) const;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_SERVICE_H_
