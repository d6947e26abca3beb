// OpenVINO Roll-7: shift elements along the given axes, wrapping around.
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/ops/ops.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "kernels/strided_copy.h"
#include "kernels/tensor_values.h"

namespace tensorops {
namespace {

constexpr char kOp[] = "Roll";

absl::StatusOr<Movement> DescribeRoll(absl::Span<const TensorView> inputs, const Attrs&) {
  const TensorView& data = inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> shifts,
                   AtField(ReadIntegers(inputs[1], "Roll: shift"), "inputs[1]"));
  ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                   AtField(ReadIntegers(inputs[2], "Roll: axes"), "inputs[2]"));
  // A scalar shift, or a 1-D shift of one element, applies to every axis (spec Example 2).
  const bool broadcast_shift = shifts.size() == 1;
  if (!broadcast_shift && shifts.size() != axes.size()) {
    return InvalidArgumentAt(
        "inputs[1].shape",
        absl::StrCat(kOp, ": input 'shift' has ", shifts.size(), " elements but 'axes' has ",
                     axes.size(), "; they must match unless shift has exactly one element"));
  }
  const int64_t rank = data.rank();
  std::vector<int64_t> total(rank, 0);  // per-axis shift, kept in [0, dim)
  for (size_t i = 0; i < axes.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t a,
                     AtField(NormalizeAxis(axes[i], rank, absl::StrCat(kOp, ": axes[", i, "]")),
                             absl::StrCat("inputs[2].data[", i, "]")));
    const int64_t n = data.shape[a];
    if (n == 0) continue;  // empty output; no division by zero
    // Reduce each shift before adding so repeated axes with huge shifts never overflow.
    const int64_t s = broadcast_shift ? shifts[0] : shifts[i];
    int64_t r = s % n;
    if (r < 0) r += n;
    total[a] = (total[a] + r) % n;
  }
  Movement m;
  m.axes.resize(rank);
  for (int64_t d = 0; d < rank; ++d) {
    m.axes[d] = total[d] == 0 ? DimTransform::Copy() : DimTransform::Roll(total[d]);
  }
  return m;
}

}  // namespace

OpDef RollOpDef() {
  OpSpec spec;
  spec.name = kOp;
  spec.aliases = {"Roll-7"};
  spec.description =
      "OpenVINO Roll-7: shifts elements along the given axes; elements shifted past the last "
      "position re-enter at the first. Positive shifts move towards larger indices. An axis "
      "listed more than once is shifted by the sum of its shifts; shifts wrap modulo the "
      "dimension.";
  const std::vector<DType> index_types = {DType::kInt32, DType::kInt64};
  spec.inputs = {
      {"data", "The tensor to roll; any rank, any element type.", AllTypes(), 0, -1},
      {"shift",
       "Scalar or 1-D INT32/INT64: places to shift. One value applies to every axis listed; "
       "otherwise one value per entry of 'axes'.",
       index_types, 0, 1},
      {"axes",
       "Scalar or 1-D INT32/INT64: axes to shift, each in [-rank(data), rank(data) - 1]; "
       "negative values count from the end.",
       index_types, 0, 1},
  };
  spec.outputs = {{"output", "The rolled tensor: same type and shape as data."}};
  return OpDef{std::move(spec), &PrepareFromMovement<&DescribeRoll>, &OutputLikeFirstInput,
               &DescribeRoll};
}

}  // namespace tensorops
