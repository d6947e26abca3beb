// Plans a chain of movements (kernels/movement.h) over one tensor as one
// pass over memory where it can, and as few passes as it must otherwise.
//
// Along one axis Reverse reads index n-1-j and Roll (j - s) mod n; any mix of
// them reads (+-j + c) mod n, so a chain of Reverses and Rolls composes, axis
// by axis, into one AxisTransformPlan: the cost of one op, whatever the length
// of the chain.
//
// A ReverseSequence couples its batch and sequence axes. With one in the
// chain, the output is walked in rows: the dims up to the last coupled one
// (the row index, mapped through every step per row, never per element) and
// the dims after it, a block each row moves with the composed per-axis plan.
// When the last coupled dim is a sequence axis (batch-major layouts), it
// belongs to the row: through the chain, a row of it reads a few runs of one
// input row (at most one more per step), forward or reversed, each moved as
// one copy or one reversal. A row shorter than kFusedMinRowBytes would cost
// more in index arithmetic than in bytes; such a chain runs in passes instead:
// each run of consecutive Reverses and Rolls composed into one pass, each
// ReverseSequence its own (its single-op kernel), through one scratch tensor.
//
// Thread-safety: the PreparedOp's passes are immutable; run_range may run
// concurrently on disjoint ranges, as for single ops.
#ifndef TENSOROPS_KERNELS_CHAIN_PLAN_H_
#define TENSOROPS_KERNELS_CHAIN_PLAN_H_

#include <cstdint>

#include "absl/types/span.h"
#include "kernels/movement.h"
#include "kernels/prepared_op.h"
#include "kernels/tensor.h"

namespace tensorops {

// Rows (bytes written per row of the fused walk) from which a chain with a
// ReverseSequence is fused into one pass; below it, passes.
inline constexpr int64_t kFusedMinRowBytes = 256;

// The kernel for `steps` applied in order to the tensor of `dtype` and
// `shape` at `in` (which must outlive the result). Every movement must be
// valid for the shape (as the ops' MovementFns make them). One step: the
// op's own single-pass plan.
PreparedOp PlanMovements(DType dtype, const Shape& shape, const void* in,
                         absl::Span<const Movement> steps);

// How PlanMovements would run `steps` (for tests and benchmarks): the number
// of passes over memory, 1 when fused.
int64_t PlannedPasses(DType dtype, const Shape& shape, absl::Span<const Movement> steps);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_CHAIN_PLAN_H_
