// OpenVINO Reverse-1: reverse the data along the axes given as indices
// (mode "index") or as a per-axis BOOL mask (mode "mask").
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

constexpr char kOp[] = "Reverse";

absl::StatusOr<Movement> DescribeReverse(absl::Span<const TensorView> inputs, const Attrs& attrs) {
  const TensorView& data = inputs[0];
  const TensorView& axis = inputs[1];
  ASSIGN_OR_RETURN(std::string mode, GetStringAttr(attrs, kOp, "mode", std::nullopt));
  const int64_t rank = data.rank();
  std::vector<bool> reversed(rank, false);
  if (mode == "index") {
    if (!IsIntegerDType(axis.dtype)) {
      return InvalidArgumentAt(
          "inputs[1].dtype",
          absl::StrCat(
              kOp, ": input 'axis' has type ", DTypeName(axis.dtype),
              "; in mode \"index\" it must have an integer type (INT8..INT64, UINT8..UINT64)"));
    }
    // The spec: "The length of the second tensor should be in a range from 0
    // to rank of the 1st input tensor." A *should*: OpenVINO accepts more
    // entries (type_prop test more_axes_index_than_input_rank), so a graph
    // exported from it runs here too; only an entry out of range is an error.
    ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                     AtField(ReadIntegers(axis, "Reverse: axis"), "inputs[1]"));
    // Duplicates (also after normalising negatives) are merged, as OpenVINO does.
    for (size_t i = 0; i < axes.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t a,
                       AtField(NormalizeAxis(axes[i], rank, absl::StrCat(kOp, ": axis[", i, "]")),
                               absl::StrCat("inputs[1].data[", i, "]")));
      reversed[a] = true;
    }
  } else if (mode == "mask") {
    if (axis.dtype != DType::kBool) {
      return InvalidArgumentAt("inputs[1].dtype",
                               absl::StrCat(kOp, ": input 'axis' has type ", DTypeName(axis.dtype),
                                            "; in mode \"mask\" it must be BOOL"));
    }
    if (axis.num_elements() != rank) {
      return InvalidArgumentAt(
          "inputs[1].shape",
          absl::StrCat(kOp, ": in mode \"mask\" input 'axis' has ", axis.num_elements(),
                       " elements but must have exactly rank(data) = ", rank));
    }
    reversed = ReadBools(axis);
  } else {
    return InvalidArgumentAt("attrs.mode",
                             absl::StrCat(kOp, ": attribute 'mode' = ", BoundedQuote(mode),
                                          " must be \"index\" or \"mask\""));
  }
  Movement m;
  m.axes.resize(rank);
  for (int64_t d = 0; d < rank; ++d) {
    m.axes[d] = reversed[d] ? DimTransform::Reverse() : DimTransform::Copy();
  }
  return m;
}

}  // namespace

OpDef ReverseOpDef() {
  OpSpec spec;
  spec.name = kOp;
  spec.aliases = {"Reverse-1"};
  spec.description =
      "OpenVINO Reverse-1: reverses the data tensor along the axes given by the second input, "
      "either as axis indices (mode \"index\") or as a BOOL mask with one entry per axis "
      "(mode \"mask\"). No axes, or an all-false mask, passes the data through unchanged.";
  std::vector<DType> axis_types = IntegerTypes();
  axis_types.push_back(DType::kBool);
  spec.inputs = {
      {"data", "The tensor to reverse; any rank, any element type.", AllTypes(), 0, -1},
      {"axis",
       "1-D. Mode \"index\": axis indices of any integer type, each in [-rank(data), "
       "rank(data) - 1], any number of them (the spec's 0 to rank(data) is a should, as in "
       "OpenVINO); repeats are reversed once. Mode \"mask\": "
       "BOOL, exactly rank(data) entries; true reverses that axis.",
       axis_types, 1, 1},
  };
  spec.attrs = {{"mode", "string", "How to read the 'axis' input: as indices or as a mask.", true,
                 "", "index | mask"}};
  spec.outputs = {{"output", "The reversed tensor: same type and shape as data."}};
  return OpDef{std::move(spec), &PrepareFromMovement<&DescribeReverse>, &OutputLikeFirstInput,
               &DescribeReverse};
}

}  // namespace tensorops
