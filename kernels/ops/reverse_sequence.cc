// OpenVINO ReverseSequence-1: for each slice along batch_axis, reverse the
// first seq_lengths[i] elements along seq_axis.
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/ops/ops.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_values.h"

namespace tensorops {
namespace {

constexpr char kOp[] = "ReverseSequence";

absl::StatusOr<Movement> DescribeReverseSequence(absl::Span<const TensorView> inputs,
                                                 const Attrs& attrs) {
  const TensorView& data = inputs[0];
  const TensorView& lengths_t = inputs[1];
  const int64_t rank = data.rank();
  ASSIGN_OR_RETURN(int64_t batch_attr, GetIntAttr(attrs, kOp, "batch_axis", 0));
  ASSIGN_OR_RETURN(int64_t seq_attr, GetIntAttr(attrs, kOp, "seq_axis", 1));
  ASSIGN_OR_RETURN(
      int64_t batch_axis,
      AtField(NormalizeAxis(batch_attr, rank, "ReverseSequence: attribute 'batch_axis'"),
              "attrs.batch_axis"));
  ASSIGN_OR_RETURN(int64_t seq_axis,
                   AtField(NormalizeAxis(seq_attr, rank, "ReverseSequence: attribute 'seq_axis'"),
                           "attrs.seq_axis"));
  if (batch_axis == seq_axis) {
    return InvalidArgumentAt(
        "attrs.seq_axis",
        absl::StrCat(kOp, ": attributes 'batch_axis' = ", batch_attr,
                     " and 'seq_axis' = ", seq_attr, " name the same axis ", batch_axis,
                     " of data of rank ", rank, "; they must differ"));
  }
  const int64_t batch = data.shape[batch_axis];
  const int64_t seq = data.shape[seq_axis];
  if (lengths_t.num_elements() != batch) {
    return InvalidArgumentAt(
        "inputs[1].shape",
        absl::StrCat(kOp, ": input 'seq_lengths' has ", lengths_t.num_elements(),
                     " elements but must have data_shape[batch_axis] = ", batch));
  }
  ASSIGN_OR_RETURN(
      std::vector<int64_t> lengths,
      AtField(ReadWholeNumbers(lengths_t, "ReverseSequence: seq_lengths"), "inputs[1]"));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0 || lengths[i] > seq) {
      return InvalidArgumentAt(
          absl::StrCat("inputs[1].data[", i, "]"),
          absl::StrCat(kOp, ": seq_lengths[", i, "] = ", lengths[i], " is out of range [0, ", seq,
                       "] (data_shape[seq_axis])"));
    }
  }
  Movement m;
  m.sequence = Movement::Sequence{batch_axis, seq_axis, std::move(lengths)};
  return m;
}

}  // namespace

OpDef ReverseSequenceOpDef() {
  OpSpec spec;
  spec.name = kOp;
  spec.aliases = {"ReverseSequence-1"};
  spec.description =
      "OpenVINO ReverseSequence-1: slices data along batch_axis and, for each slice i, "
      "reverses the first seq_lengths[i] elements along seq_axis; the rest are copied. "
      "Lengths 0 and 1 both leave a slice unchanged.";
  spec.inputs = {
      {"data", "Tensor of rank >= 2, any element type.", AllTypes(), 2, -1},
      {"seq_lengths",
       "1-D, data_shape[batch_axis] elements of any integer or floating type; each a whole "
       "number in [0, data_shape[seq_axis]].",
       IntegerAndFloatingTypes(), 1, 1},
  };
  spec.attrs = {
      {"batch_axis", "int", "The batch dimension, along which data is sliced.", false, "0",
       "[-rank(data), rank(data) - 1]"},
      {"seq_axis", "int", "The sequence dimension, along which elements are reversed.", false, "1",
       "[-rank(data), rank(data) - 1], different from batch_axis"},
  };
  spec.outputs = {{"output", "Same type and shape as data."}};
  return OpDef{std::move(spec), &PrepareFromMovement<&DescribeReverseSequence>,
               &OutputLikeFirstInput, &DescribeReverseSequence};
}

}  // namespace tensorops
