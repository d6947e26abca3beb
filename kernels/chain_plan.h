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
#include <memory>
#include <vector>

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

// The same chain read the other way round, for a stream whose output leaves
// while its input arrives (ExecuteStream with flow): where each piece of the
// input lands in the output. Every movement is a permutation of positions, so
// the input is cut into blocks (the trailing dims, at most `max_block_bytes`)
// and a run of consecutive input blocks inside one row (the dims before the
// block, walked as the fused plan walks them) lands as a few runs of
// consecutive output blocks, forward or reversed: each step's map inverted
// (a Reverse or Roll along an axis is j -> +-j + c, a ReverseSequence is its
// own inverse) and applied to the run with the fused plan's MapRuns and
// ReversePrefixRuns. The blocks themselves move with the chain's composed
// per-axis plan of the trailing dims.
//
// Make returns null where the runs would be shorter than `min_row_bytes`
// (a ReverseSequence whose batch axis is the last dim, or a time-major one
// over rows of a few bytes): the caller buffers such a stream whole.
//
// Example (Roll by 1 along axis 0 of a [4, 1024] UINT8 tensor, blocks of the
// 1024-byte rows): input blocks [0, 2) land at output blocks [1, 3).
//
// Thread-safety: immutable after Make; Map and Move may run concurrently.
class FlowPlan {
 public:
  // Output blocks [out_block, out_block + count) come from input blocks
  // [in_block, in_block + count), in order, or in reverse order when
  // `reversed` (output block out_block + k from in_block + count - 1 - k).
  struct Piece {
    int64_t in_block = 0;
    int64_t out_block = 0;
    int64_t count = 0;
    bool reversed = false;
  };

  // `steps` as for PlanMovements; the tensor must have at least one element.
  static std::unique_ptr<FlowPlan> Make(DType dtype, const Shape& shape,
                                        absl::Span<const Movement> steps, int64_t max_block_bytes,
                                        int64_t min_row_bytes);
  ~FlowPlan();

  int64_t block_bytes() const { return block_; }
  // Blocks per row: a run passed to Map stays inside one row.
  int64_t row_blocks() const { return row_n_; }

  // Appends where input blocks [first, first + count) land (inside one row).
  void Map(int64_t first, int64_t count, std::vector<Piece>* pieces) const;
  // Writes the piece's output blocks at `out` from its input blocks at `in`
  // (the bytes of input block p.in_block onwards).
  void Move(const Piece& p, const char* in, char* out) const;

 private:
  struct Step;
  FlowPlan() = default;

  int64_t width_ = 0;
  int64_t split_ = 0;  // the run axis: dims before it index the row
  int64_t row_n_ = 1;  // its size
  int64_t block_ = 0;  // bytes of the dims after it
  Shape prefix_;       // sizes of the row dims
  std::vector<Step> steps_;
  std::unique_ptr<AxisTransformPlan> inner_;  // null: blocks are copied
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_CHAIN_PLAN_H_
