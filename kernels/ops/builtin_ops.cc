// The explicit list of built-in ops, and type sets their specs share.
#include "kernels/ops/ops.h"

namespace tensorops {

std::vector<DType> AllTypes() {
  auto all = AllDTypes();
  return {all.begin(), all.end()};
}

std::vector<DType> IntegerTypes() {
  std::vector<DType> out;
  for (DType d : AllDTypes()) {
    if (IsIntegerDType(d)) out.push_back(d);
  }
  return out;
}

std::vector<DType> IntegerAndFloatingTypes() {
  std::vector<DType> out;
  for (DType d : AllDTypes()) {
    if (IsIntegerDType(d) || IsFloatingDType(d)) out.push_back(d);
  }
  return out;
}

void RegisterBuiltinOps(OpRegistry* registry) {
  registry->Register(ReverseOpDef());
  registry->Register(ReverseSequenceOpDef());
  registry->Register(RollOpDef());
  registry->Register(OnnxReverseSequenceOpDef());
}

}  // namespace tensorops
