// The request path below the RPC layer: decode + validate (Prepare), then
// kernel + encode (Run). Split in two so a later step can queue between them.
#ifndef TENSOROPS_SERVER_V1_EXECUTION_H_
#define TENSOROPS_SERVER_V1_EXECUTION_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/limits.h"
#include "wire/tensor_codec.h"

namespace tensorops {

// A validated Execute call, ready to run. Holds views into the request,
// which must outlive it. Not thread-safe; Run at most once.
class PreparedExecution {
 public:
  // Decodes every input and the attributes and runs the op's validation,
  // enforcing `limits` (per tensor while decoding; decoded inputs plus the
  // output against max_request_bytes). A chain (request.then) is validated
  // step by step and planned as one op (OpRegistry::PrepareChain).
  static absl::StatusOr<std::unique_ptr<PreparedExecution>> Make(
      const OpRegistry& registry, const v1::ExecuteRequest& request,
      const RequestLimits& limits = RequestLimits());

  // Runs the kernel and writes the output into `response` in the data
  // input's encoding (raw output is written in place, no extra copy). With a
  // pool, outputs of at least `min_parallel_bytes` are split across it.
  void Run(v1::ExecuteResponse* response, ThreadPool* pool = nullptr,
           int64_t min_parallel_bytes = kDefaultMinParallelBytes);

  // True when the output goes out as its bytes (raw_data, not STRING): then
  // RunRaw can write them into a buffer of the caller's (the gRPC door's
  // reply slice, server/grpc/raw_unary.h) instead of the response message.
  bool raw_output() const { return encoding_ == Encoding::kRaw && op_.dtype != DType::kString; }
  DType output_dtype() const { return op_.dtype; }
  const Shape& output_shape() const { return op_.shape; }
  // Runs the kernel into `out`, output_bytes() bytes. Only when raw_output().
  void RunRaw(void* out, ThreadPool* pool = nullptr,
              int64_t min_parallel_bytes = kDefaultMinParallelBytes);

  // Bytes of output the kernel writes (for metrics and admission later).
  int64_t output_bytes() const;
  // Bytes a chain that runs in passes needs besides (admission counts them).
  int64_t scratch_bytes() const { return op_.scratch_bytes(); }
  // A chain's ops after the first (empty: a single op).
  absl::Span<const OpDef* const> chain() const { return op_.chain; }

 private:
  PreparedExecution() = default;

  std::vector<DecodedTensor> inputs_;
  PreparedOp op_;
  Encoding encoding_ = Encoding::kRaw;
};

// Convenience: Make + Run.
absl::Status Execute(const OpRegistry& registry, const v1::ExecuteRequest& request,
                     v1::ExecuteResponse* response, const RequestLimits& limits = RequestLimits());

// Fills a ListOps reply from the registry's specs.
void DescribeOps(const OpRegistry& registry, v1::ListOpsResponse* response);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_V1_EXECUTION_H_
