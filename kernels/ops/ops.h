// Op definitions, one per file in kernels/ops/. RegisterBuiltinOps() adds
// them to a registry; nothing registers itself.
#ifndef TENSOROPS_KERNELS_OPS_OPS_H_
#define TENSOROPS_KERNELS_OPS_OPS_H_

#include <vector>

#include "kernels/chain_plan.h"
#include "kernels/op_registry.h"
#include "kernels/status_macros.h"

namespace tensorops {

OpDef ReverseOpDef();
OpDef ReverseSequenceOpDef();
OpDef RollOpDef();
OpDef OnnxReverseSequenceOpDef();

// The PrepareFn of an op described by a MovementFn: its single-op plan.
template <MovementFn Describe>
absl::StatusOr<PreparedOp> PrepareFromMovement(absl::Span<const TensorView> inputs,
                                               const Attrs& attrs) {
  ASSIGN_OR_RETURN(Movement m, Describe(inputs, attrs));
  return PlanMovements(inputs[0].dtype, inputs[0].shape, inputs[0].data,
                       absl::MakeConstSpan(&m, 1));
}

// Type sets used in several OpSpecs.
std::vector<DType> AllTypes();
std::vector<DType> IntegerTypes();
std::vector<DType> IntegerAndFloatingTypes();

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_OPS_OPS_H_
