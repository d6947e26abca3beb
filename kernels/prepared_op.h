// A prepared op: what the registry's Prepare (kernels/op_registry.h) and the
// chain planner (kernels/chain_plan.h) both make, and how it runs. Its own
// header so that the planner and the registry both depend down on it, and
// neither on the other's header.
#ifndef TENSOROPS_KERNELS_PREPARED_OP_H_
#define TENSOROPS_KERNELS_PREPARED_OP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/tensor.h"

namespace tensorops {

struct OpDef;  // kernels/op_registry.h
class ThreadPool;

// A validated call: the output's type and shape are known, and the output
// (NumElements(shape) * ElementWidth(dtype) bytes) splits into `units`
// independent parts; run_range(out, begin, end) writes parts [begin, end), so
// disjoint ranges can run on different threads with identical results.
// run_range reads the input views it was prepared from (they must outlive it)
// and performs no checks: everything was validated before it was made.
//
// A chain that cannot run in one pass (kernels/chain_plan.h) has more passes
// in `then`: each reads the whole output of the pass before it. RunPrepared
// and Run run them in order through one scratch tensor of output_bytes()
// (scratch_bytes(), which admission must count); run_range alone is then
// only the first pass.
struct PreparedOp {
  DType dtype = DType::kInvalid;
  Shape shape;
  int64_t units = 1;
  std::function<void(void* out, int64_t begin, int64_t end)> run_range;

  struct Pass {
    int64_t units = 1;
    std::function<void(const void* in, void* out, int64_t begin, int64_t end)> run_range;
  };
  std::vector<Pass> then;
  // A chain's ops after the first, in order (for metrics and logs).
  std::vector<const OpDef*> chain;

  int64_t output_bytes() const { return NumElements(shape) * ElementWidth(dtype); }
  // Memory the op needs besides its inputs and output.
  int64_t scratch_bytes() const { return then.empty() ? 0 : output_bytes(); }
  // Writes the whole output on the calling thread.
  void Run(void* out) const;
};

// Output size from which one op's kernel is split across the pool: two
// threads pay off from about 1 MiB here (--min_parallel_bytes; the one default).
inline constexpr int64_t kDefaultMinParallelBytes = int64_t{1} << 20;

// Writes the whole output, split across `pool` when it has at least
// `min_parallel_bytes` of output; inline when smaller or when pool is null.
// An op with more passes (op.then) alternates between `out` and `scratch`
// (output_bytes(), allocated here when null; the last pass writes `out`), so
// `scratch` may be the buffer the first pass reads when the number of passes
// is odd, and must not be otherwise.
void RunPrepared(const PreparedOp& op, void* out, ThreadPool* pool,
                 int64_t min_parallel_bytes = kDefaultMinParallelBytes, void* scratch = nullptr);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_PREPARED_OP_H_
