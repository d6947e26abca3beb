#include "kernels/prepared_op.h"

#include <algorithm>
#include <cstdint>

#include "kernels/thread_pool.h"

namespace tensorops {

void PreparedOp::Run(void* out) const { RunPrepared(*this, out, nullptr); }

namespace {

// One pass of `units` parts over an output of `bytes`, split across the pool
// from min_parallel_bytes.
template <typename RangeFn>
void RunPass(int64_t units, int64_t bytes, const RangeFn& run_range, ThreadPool* pool,
             int64_t min_parallel_bytes) {
  if (pool == nullptr || pool->num_threads() < 2 || bytes < min_parallel_bytes || units < 2) {
    run_range(int64_t{0}, units);
    return;
  }
  // Each chunk should carry at least half the threshold so small parts never
  // pay the hand-off cost.
  const int64_t bytes_per_unit = std::max<int64_t>(1, bytes / units);
  const int64_t grain = std::max<int64_t>(1, (min_parallel_bytes / 2) / bytes_per_unit);
  pool->ParallelFor(units, grain, [&run_range](int64_t b, int64_t e) { run_range(b, e); });
}

}  // namespace

void RunPrepared(const PreparedOp& op, void* out, ThreadPool* pool, int64_t min_parallel_bytes,
                 void* scratch) {
  const int64_t bytes = op.output_bytes();
  if (op.then.empty()) {
    RunPass(
        op.units, bytes, [&op, out](int64_t b, int64_t e) { op.run_range(out, b, e); }, pool,
        min_parallel_bytes);
    return;
  }
  // Passes alternate between `out` and one scratch tensor so that the last
  // one writes `out`.
  Tensor owned;
  if (scratch == nullptr) {
    owned = Tensor(op.dtype, op.shape);
    scratch = owned.mutable_data();
  }
  const size_t passes = op.then.size() + 1;
  auto target = [&](size_t pass) -> void* { return (passes - 1 - pass) % 2 == 0 ? out : scratch; };
  void* first = target(0);
  RunPass(
      op.units, bytes, [&op, first](int64_t b, int64_t e) { op.run_range(first, b, e); }, pool,
      min_parallel_bytes);
  for (size_t p = 1; p < passes; ++p) {
    const PreparedOp::Pass& pass = op.then[p - 1];
    const void* in = target(p - 1);
    void* dst = target(p);
    RunPass(
        pass.units, bytes,
        [&pass, in, dst](int64_t b, int64_t e) { pass.run_range(in, dst, b, e); }, pool,
        min_parallel_bytes);
  }
}

}  // namespace tensorops
