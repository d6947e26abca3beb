// What a data-movement op does, as data rather than as a kernel: which input
// element each output element reads. Every built-in op keeps the type and
// shape and only moves elements, so a chain of them is one permutation of
// positions; describing each op this way lets kernels/chain_plan.h compose a
// chain into one pass over memory instead of running op after op.
//
// Example (Roll by 1 along axis 1 of a [2, 3] tensor):
//   Movement m;
//   m.axes = {DimTransform::Copy(), DimTransform::Roll(1)};
#ifndef TENSOROPS_KERNELS_MOVEMENT_H_
#define TENSOROPS_KERNELS_MOVEMENT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/strided_copy.h"

namespace tensorops {

struct Movement {
  // Along each axis independently (Reverse, Roll): one entry per dim of the
  // data; unused when `sequence` is set.
  std::vector<DimTransform> axes;

  // ReverseSequence: for each index i along batch_axis, the first lengths[i]
  // positions along seq_axis are reversed, the rest copied. Axes normalised
  // and distinct, lengths in [0, shape[seq_axis]].
  struct Sequence {
    int64_t batch_axis = 0;
    int64_t seq_axis = 1;
    std::vector<int64_t> lengths;
  };
  std::optional<Sequence> sequence;
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_MOVEMENT_H_
