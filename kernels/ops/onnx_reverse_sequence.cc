// ONNX ReverseSequence: the same movement as ReverseSequence-1 with ONNX's
// attribute names (time_axis), defaults (batch_axis 1, time_axis 0) and rules
// (axes 0 or 1 only; sequence_lens INT64, INT32 also accepted).
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/ops/ops.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_values.h"

namespace tensorops {
namespace {

constexpr char kOp[] = "onnx.ReverseSequence";

absl::Status CheckZeroOrOne(absl::string_view name, int64_t v) {
  if (v == 0 || v == 1) return absl::OkStatus();
  return InvalidArgumentAt(absl::StrCat("attrs.", name),
                           absl::StrCat(kOp, ": attribute '", name, "' = ", v, " must be 0 or 1"));
}

absl::StatusOr<Movement> DescribeOnnxReverseSequence(absl::Span<const TensorView> inputs,
                                                     const Attrs& attrs) {
  const TensorView& data = inputs[0];
  const TensorView& lengths_t = inputs[1];
  ASSIGN_OR_RETURN(int64_t batch_axis, GetIntAttr(attrs, kOp, "batch_axis", 1));
  ASSIGN_OR_RETURN(int64_t time_axis, GetIntAttr(attrs, kOp, "time_axis", 0));
  RETURN_IF_ERROR(CheckZeroOrOne("batch_axis", batch_axis));
  RETURN_IF_ERROR(CheckZeroOrOne("time_axis", time_axis));
  if (batch_axis == time_axis) {
    return InvalidArgumentAt(
        "attrs.time_axis", absl::StrCat(kOp, ": attributes 'batch_axis' and 'time_axis' are both ",
                                        batch_axis, "; they must differ"));
  }
  const int64_t batch = data.shape[batch_axis];
  const int64_t time = data.shape[time_axis];
  if (lengths_t.num_elements() != batch) {
    return InvalidArgumentAt(
        "inputs[1].shape",
        absl::StrCat(kOp, ": input 'sequence_lens' has ", lengths_t.num_elements(),
                     " elements but must have input_shape[batch_axis] = ", batch));
  }
  ASSIGN_OR_RETURN(
      std::vector<int64_t> lengths,
      AtField(ReadIntegers(lengths_t, "onnx.ReverseSequence: sequence_lens"), "inputs[1]"));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0 || lengths[i] > time) {
      return InvalidArgumentAt(
          absl::StrCat("inputs[1].data[", i, "]"),
          absl::StrCat(kOp, ": sequence_lens[", i, "] = ", lengths[i], " is out of range [0, ",
                       time, "] (input_shape[time_axis])"));
    }
  }
  Movement m;
  m.sequence = Movement::Sequence{batch_axis, time_axis, std::move(lengths)};
  return m;
}

}  // namespace

OpDef OnnxReverseSequenceOpDef() {
  OpSpec spec;
  spec.name = kOp;
  spec.description =
      "ONNX ReverseSequence: for each slice i along batch_axis, reverses the first "
      "sequence_lens[i] elements along time_axis and copies the rest.";
  spec.inputs = {
      {"input", "Tensor of rank >= 2, any element type.", AllTypes(), 2, -1},
      {"sequence_lens",
       "1-D INT64 (INT32 also accepted), input_shape[batch_axis] elements, each in "
       "[0, input_shape[time_axis]].",
       {DType::kInt64, DType::kInt32},
       1,
       1},
  };
  spec.attrs = {
      {"batch_axis", "int", "The batch axis.", false, "1", "0 | 1, different from time_axis"},
      {"time_axis", "int", "The time axis, along which elements are reversed.", false, "0",
       "0 | 1, different from batch_axis"},
  };
  spec.outputs = {{"Y", "Same type and shape as input."}};
  return OpDef{std::move(spec), &PrepareFromMovement<&DescribeOnnxReverseSequence>,
               &OutputLikeFirstInput, &DescribeOnnxReverseSequence};
}

}  // namespace tensorops
