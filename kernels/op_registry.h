// The op registry: maps an op name or alias to its description (what ListOps
// shows), its validation and its kernel. Filled explicitly by
// RegisterBuiltinOps(), called from main and from tests; no static initialisers.
//
// Thread-safety: Register() is not synchronised and must finish before the
// registry is shared; after that every const method is safe from any thread.
#ifndef TENSOROPS_KERNELS_OP_REGISTRY_H_
#define TENSOROPS_KERNELS_OP_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/attrs.h"
#include "kernels/dtype.h"
#include "kernels/movement.h"
#include "kernels/prepared_op.h"
#include "kernels/tensor.h"

namespace tensorops {

struct InputSpec {
  std::string name;
  std::string description;
  std::vector<DType> types;  // allowed element types
  int64_t min_rank = 0;
  int64_t max_rank = -1;  // -1: unbounded
};

struct OutputSpec {
  std::string name;
  std::string description;
};

struct AttrSpec {
  std::string name;
  std::string type;  // "int" or "string"
  std::string description;
  bool required = false;
  std::string default_value;  // as text; empty when required
  std::string range;          // human-readable allowed values
};

struct OpSpec {
  std::string name;                  // canonical, e.g. "Roll"
  std::vector<std::string> aliases;  // e.g. "Roll-7"
  std::string description;
  std::vector<InputSpec> inputs;  // in the spec's order
  std::vector<AttrSpec> attrs;
  std::vector<OutputSpec> outputs;
};

// Op-specific validation and planning. The registry has already checked the
// number of inputs, their dtypes and ranks against the OpSpec, and rejected
// unknown attributes.
using PrepareFn = absl::StatusOr<PreparedOp> (*)(absl::Span<const TensorView> inputs,
                                                 const Attrs& attrs);

// The element type and shape of a tensor, without its data.
struct TensorType {
  DType dtype = DType::kInvalid;
  Shape shape;

  // NumElements(shape) * ElementWidth(dtype); callers that take shapes from
  // a request check the product first (kernels/shape.h CheckedByteSize).
  int64_t bytes() const { return NumElements(shape) * ElementWidth(dtype); }
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
  friend bool operator!=(const TensorType& a, const TensorType& b) { return !(a == b); }
};

// Output inference (as TF Lite's Prepare / ONNX Runtime's shape inference
// beside the kernel): the type and shape of every output, in OpSpec::outputs
// order, from the inputs' types and shapes and the attributes alone. The
// views' data may be null, so an op whose output shape depends on an input's
// values cannot be inferred this way and says so (UNIMPLEMENTED). Called
// after the registry's generic checks; an op's prepare must plan exactly the
// output its inference gives (OpRegistry::Prepare checks it).
using InferFn = absl::StatusOr<std::vector<TensorType>> (*)(absl::Span<const TensorView> inputs,
                                                            const Attrs& attrs);

// The InferFn of an op with one output of its first input's type and shape
// (every built-in op: they move data, they do not change it).
absl::StatusOr<std::vector<TensorType>> OutputLikeFirstInput(absl::Span<const TensorView> inputs,
                                                             const Attrs& attrs);

// An op that only moves elements (every built-in one) can describe what it
// does as a Movement (kernels/movement.h), from the same inputs and
// attributes as its prepare and with the same checks and messages; only the
// type and shape of inputs[0] are read (its data may be null). Ops that
// have one can be steps of a chain.
using MovementFn = absl::StatusOr<Movement> (*)(absl::Span<const TensorView> inputs,
                                                const Attrs& attrs);

struct OpDef {
  OpSpec spec;
  PrepareFn prepare = nullptr;
  InferFn infer = nullptr;
  MovementFn movement = nullptr;  // optional
};

// One op of a chain after the first: its name or alias, its inputs after the
// first (which is the previous op's output) and its attributes. The views'
// data must outlive the PreparedOp made from them.
struct ChainStep {
  std::string op;
  std::vector<TensorView> inputs;
  Attrs attrs;
};

// Steps a chain may have after its first op (../shared/api.md, "Chains").
inline constexpr int kMaxChainSteps = 64;
// INVALID_ARGUMENT "then has N steps; ..." past kMaxChainSteps: the one
// message for every place that counts a chain's steps (decoders check it
// before decoding them).
absl::Status CheckChainLength(int64_t steps);

class OpRegistry {
 public:
  // Adds an op; its name and aliases must be new and it must have prepare
  // and infer functions (a programming error otherwise).
  void Register(OpDef def);

  // nullptr when neither a name nor an alias matches.
  const OpDef* Find(absl::string_view name_or_alias) const;

  // Registered ops in registration order.
  const std::vector<std::unique_ptr<OpDef>>& ops() const { return ops_; }

  // Finds the op and runs the checks every op shares (input count, types,
  // ranks, attribute names): everything that needs no tensor data, so the
  // views' data may be null. Errors as for Prepare.
  absl::StatusOr<const OpDef*> CheckCall(absl::string_view op, absl::Span<const TensorView> inputs,
                                         const Attrs& attrs) const;

  // Finds the op, runs the generic checks and the op's output inference:
  // what the call will write, before any input data is needed (the views'
  // data may be null). Errors as for CheckCall.
  absl::StatusOr<std::vector<TensorType>> InferOutputs(absl::string_view op,
                                                       absl::Span<const TensorView> inputs,
                                                       const Attrs& attrs) const;

  // Finds the op, runs the generic checks and the op's own validation.
  // Unknown op: UNIMPLEMENTED listing the known ones. Bad input:
  // INVALID_ARGUMENT. An op whose plan differs from its inferred output:
  // INTERNAL (a bug in the op, never the caller's).
  absl::StatusOr<PreparedOp> Prepare(absl::string_view op, absl::Span<const TensorView> inputs,
                                     const Attrs& attrs) const;

  // The steps of a chain whose first op writes `first_output`: each step
  // checked as its op checks it with the previous output as its first
  // input (generic checks, its Movement, its inference). Errors name the
  // step, "then[2] (Roll): ..." (INVALID_ARGUMENT; an unknown op
  // UNIMPLEMENTED "then[2]: unknown op ..."); more than kMaxChainSteps
  // steps: INVALID_ARGUMENT. Returns each step's movement, in order, and,
  // with `defs`, appends each step's op (for metrics).
  absl::StatusOr<std::vector<Movement>> CheckChain(const TensorType& first_output,
                                                   absl::Span<const ChainStep> then,
                                                   std::vector<const OpDef*>* defs = nullptr) const;

  // A chain: `op` on `inputs`, then every step in order, planned as one pass
  // over memory where the composition allows (kernels/chain_plan.h). With no
  // steps, exactly Prepare. The first op's errors are Prepare's.
  //
  // Example: Reverse rows, then Roll by 1 along axis 1:
  //   ChainStep roll{"Roll", {shift.view(), axes.view()}, {}};
  //   auto op = registry.PrepareChain("Reverse", {data, axis}, attrs, {roll});
  absl::StatusOr<PreparedOp> PrepareChain(absl::string_view op, absl::Span<const TensorView> inputs,
                                          const Attrs& attrs,
                                          absl::Span<const ChainStep> then) const;

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
  absl::flat_hash_map<std::string, const OpDef*> by_name_;
};

// Registers Reverse, ReverseSequence, Roll and onnx.ReverseSequence.
void RegisterBuiltinOps(OpRegistry* registry);

// Convenience for tests and tools: Prepare, then run into a new Tensor.
absl::StatusOr<Tensor> ExecuteOp(const OpRegistry& registry, absl::string_view op,
                                 absl::Span<const TensorView> inputs, const Attrs& attrs);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_OP_REGISTRY_H_
