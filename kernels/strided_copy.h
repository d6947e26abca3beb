// The data-movement engine shared by the ops.
//
// Ops never loop over elements with div/mod. They describe, per dimension,
// whether it is copied, reversed or rolled; AxisTransformPlan simplifies the
// shape (drops size-1 dims, merges neighbours treated alike, folds untouched
// trailing dims into one contiguous block) and then moves whole blocks:
// memcpy for forward runs, a width-dispatched loop for reversed runs
// (reverse_rows.h), short rolled rows as whole lines (rolled_rows.h).
// Outputs past the last-level cache are written with streaming stores.
//
// Thread-safety: a plan is immutable after Make(); Run/RunRange may be called
// concurrently on disjoint output ranges.
#ifndef TENSOROPS_KERNELS_STRIDED_COPY_H_
#define TENSOROPS_KERNELS_STRIDED_COPY_H_

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "kernels/reverse_rows.h"  // ReverseBlocks, ReverseRows: the ops use them too
#include "kernels/tensor.h"

namespace tensorops {

// What happens along one dimension of a same-shape op: output index j reads
// input index
//   kCopy:        j
//   kReverse:     n-1-j
//   kRoll:        (j - shift) mod n
//   kReverseRoll: (shift - j) mod n  (a reversal then a roll: what a chain of
//                 Reverses and Rolls along one axis composes to)
struct DimTransform {
  enum class Kind { kCopy, kReverse, kRoll, kReverseRoll };
  Kind kind = Kind::kCopy;
  // kRoll, kReverseRoll: already reduced to [0, size) (a size-0 dim has 0).
  int64_t shift = 0;

  static DimTransform Copy() { return {Kind::kCopy, 0}; }
  static DimTransform Reverse() { return {Kind::kReverse, 0}; }
  static DimTransform Roll(int64_t s) { return {Kind::kRoll, s}; }
  static DimTransform ReverseRoll(int64_t s) { return {Kind::kReverseRoll, s}; }
};

class AxisTransformPlan {
 public:
  // `per_dim` has one entry per dim of `shape`; the shape is validated.
  AxisTransformPlan(const Shape& shape, int64_t elem_width, absl::Span<const DimTransform> per_dim);

  // The same, choosing streaming stores by `stream` instead of by the
  // tensor's own size: for a plan that moves one block of a bigger output
  // (a fused chain's inner dims).
  AxisTransformPlan(const Shape& shape, int64_t elem_width, absl::Span<const DimTransform> per_dim,
                    bool stream);

  // out = transform(in); both buffers hold the whole tensor.
  void Run(const void* in, void* out) const { RunRange(in, out, 0, outer_size()); }
  // Run without the closing fence: for a caller that runs many blocks and
  // fences once (StreamFence) before another thread may read the output.
  void RunUnfenced(const void* in, void* out) const { RunRangeUnfenced(in, out, 0, outer_size()); }
  // RunUnfenced on `rows` tensors at once: tensor k reads in + k * in_step
  // and writes out + k * out_step (steps in bytes, may be negative). A plan
  // of one simplified dim makes one call per run for all the rows (a fused
  // chain's short blocks: a call per block would cost more than its bytes).
  void RunRowsUnfenced(const void* in, int64_t in_step, void* out, int64_t out_step,
                       int64_t rows) const;

  // Writes only output rows [begin, end) of the outermost simplified dim, so
  // workers can split one tensor without overlapping writes.
  void RunRange(const void* in, void* out, int64_t begin, int64_t end) const;

  // Size of the outermost simplified dim (1 when everything folded into one block).
  int64_t outer_size() const { return dims_.empty() ? 1 : dims_[0].size; }
  // Simplified rank (for tests and benchmarks).
  int64_t simplified_rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t block_bytes() const { return block_; }
  // Whether RunRange writes with streaming stores (the output is at least
  // StreamingStoreMinBytes() when the plan was made); it fences before returning.
  bool streams() const { return stream_; }

 private:
  // Output positions [out_start, out_start+count) come from input positions
  // in_start, in_start+1, ... (or in_start, in_start-1, ... when reversed).
  struct Segment {
    int64_t out_start;
    int64_t in_start;
    int64_t count;
    bool reversed;
  };
  struct Dim {
    int64_t size;
    int64_t stride;  // bytes
    absl::InlinedVector<Segment, 2> segments;
  };

  void RunRangeUnfenced(const void* in, void* out, int64_t begin, int64_t end) const;
  // `rows` rows of an innermost dim of two runs (a roll, or a reversal
  // rolled) written as whole streamed lines, when the output streams and the
  // rows are short whole lines of an aligned output; false (nothing written)
  // otherwise.
  bool StreamWholeLineRows(absl::Span<const Segment> segments, const char* in, int64_t in_step,
                           char* out, int64_t out_step, int64_t rows) const;
  // `rows` rows of the innermost dim, made of `segments`, the first at
  // in/out, stepping in_step/out_step bytes.
  void Runs(absl::Span<const Segment> segments, const char* in, int64_t in_step, char* out,
            int64_t out_step, int64_t rows) const;
  void Recurse(size_t d, const char* in, char* out) const;
  // `count` rows of dim d (d + 1 is the innermost dim), the first at
  // in/out, stepping in_step/out_step bytes: one ReverseRows call when the
  // innermost dim is a plain reversal, else Recurse per row.
  void Rows(size_t d, const char* in, int64_t in_step, char* out, int64_t out_step,
            int64_t count) const;

  absl::InlinedVector<Dim, 6> dims_;
  int64_t block_ = 0;    // bytes in the innermost contiguous block
  bool empty_ = false;   // some dim is 0: nothing to write
  bool stream_ = false;  // non-temporal stores (set once from the output size)
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_STRIDED_COPY_H_
