// Op definitions, one per file in kernels/ops/. RegisterBuiltinOps() adds
// them to a registry; nothing registers itself.
#ifndef TENSOROPS_KERNELS_OPS_OPS_H_
#define TENSOROPS_KERNELS_OPS_OPS_H_

#include <vector>

#include "kernels/op_registry.h"

namespace tensorops {

OpDef ReverseOpDef();
OpDef ReverseSequenceOpDef();
OpDef RollOpDef();
OpDef OnnxReverseSequenceOpDef();

// Type sets used in several OpSpecs.
std::vector<DType> AllTypes();
std::vector<DType> IntegerTypes();
std::vector<DType> IntegerAndFloatingTypes();

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_OPS_OPS_H_
