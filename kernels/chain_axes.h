// What a chain of movements (kernels/movement.h) does to each axis of one
// tensor: the axis analysis both plans of kernels/chain_plan.h start from
// (the fused chain plan, which walks the output in rows, and FlowPlan, which
// maps input blocks to output blocks as a stream's input arrives).
//
// Along one axis Reverse reads index n-1-j and Roll (j - s) mod n; any mix
// of them reads (sign * j + offset) mod n, an AxisMap, and maps compose, so
// a chain of Reverses and Rolls is one map per axis. A ReverseSequence
// couples its batch and sequence axes (how far a row reverses depends on its
// batch index), so those axes are not free: the plans walk every axis up to
// the last coupled one row by row, through each step, and the axes after it
// as one block moved by the composed maps (TrailingPlan).
//
// Example ([4, 8, 16] with Roll(1) on axis 2, then ReverseSequence batch 0,
// seq 1, then Reverse on axis 2): axes 0 and 1 are coupled, axis 1 is the
// last coupled one and a sequence axis, so first_run_axis() is 1 and axis 2
// is free with free_map(2) = Roll(1) then Reverse, composed.
//
// Thread-safety: immutable after construction; AxisMap is a value.
#ifndef TENSOROPS_KERNELS_CHAIN_AXES_H_
#define TENSOROPS_KERNELS_CHAIN_AXES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "kernels/movement.h"
#include "kernels/strided_copy.h"
#include "kernels/tensor.h"

namespace tensorops {

// Along one axis of size n: output index j reads input index
// (sign * j + offset) mod n, sign +-1, offset in [0, n).
struct AxisMap {
  int64_t sign = 1;
  int64_t offset = 0;

  bool identity() const { return sign == 1 && offset == 0; }

  // One movement's transform along an axis of size n.
  static AxisMap From(const DimTransform& t, int64_t n);
  // The transform that reads as this map does (Copy, Reverse, Roll or ReverseRoll).
  DimTransform ToTransform(int64_t n) const;
  // The map that reads through `next` first and then through `prev`:
  // j -> prev(next(j)). A chain's output reads its input at
  // f_1(f_2(...f_K(j))), so steps fold in as prev = Compose(prev, f_k).
  static AxisMap Compose(const AxisMap& prev, const AxisMap& next, int64_t n);
  // The map that undoes this one (input index -> output index).
  AxisMap Inverse(int64_t n) const;

  // The input index output index j (in [0, n)) reads.
  int64_t Apply(int64_t j, int64_t n) const {
    int64_t v = sign * j + offset;  // in (-n, 2n)
    if (v >= n) {
      v -= n;
    } else if (v < 0) {
      v += n;
    }
    return v;
  }
};

// The composed per-axis maps of a run of Reverse/Roll movements (a
// ReverseSequence among `steps` is skipped).
std::vector<AxisMap> ComposeAxes(const Shape& shape, absl::Span<const Movement> steps);

// The same maps as one transform per axis.
std::vector<DimTransform> ToTransforms(const Shape& shape, const std::vector<AxisMap>& maps);

class ChainAxes {
 public:
  // Every movement must be valid for `shape` (as the ops' MovementFns make them).
  ChainAxes(const Shape& shape, absl::Span<const Movement> steps);

  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  // A batch or sequence axis of some ReverseSequence in the chain.
  bool coupled(int64_t axis) const { return coupled_[axis]; }
  // A batch axis of some ReverseSequence.
  bool batch(int64_t axis) const { return batch_[axis]; }
  // The last coupled axis; -1 when no step is a ReverseSequence.
  int64_t last_coupled() const { return last_; }
  // The first axis a row walk may run along: the axes before it index rows
  // (each through every step), so it is the last coupled axis when that is a
  // sequence axis (a row along it reverses a prefix per step), one past it
  // when that is a batch axis (its lengths are per row), 0 without coupling.
  int64_t first_run_axis() const;
  // Every Reverse and Roll of the chain along `axis`, composed: what the
  // axis does when it is free (not coupled).
  const AxisMap& free_map(int64_t axis) const { return free_[axis]; }

  // The plan that moves one block of the axes after `split` (all free) by
  // their composed maps, streaming stores by `stream`; null when it would
  // only copy.
  std::unique_ptr<AxisTransformPlan> TrailingPlan(int64_t split, int64_t width, bool stream) const;

 private:
  Shape shape_;
  std::vector<bool> coupled_, batch_;
  int64_t last_ = -1;
  std::vector<AxisMap> free_;
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_CHAIN_AXES_H_
