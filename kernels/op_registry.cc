#include "kernels/op_registry.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "kernels/chain_plan.h"
#include "kernels/field_path.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"

namespace tensorops {
namespace {

std::string KnownOps(const std::vector<std::unique_ptr<OpDef>>& ops) {
  std::vector<std::string> names;
  for (const auto& op : ops) {
    names.push_back(
        op->spec.aliases.empty()
            ? op->spec.name
            : absl::StrCat(op->spec.name, " (", absl::StrJoin(op->spec.aliases, ", "), ")"));
  }
  return absl::StrJoin(names, ", ");
}

std::string TypeList(const std::vector<DType>& types) {
  return absl::StrJoin(types, ", ",
                       [](std::string* out, DType t) { absl::StrAppend(out, DTypeName(t)); });
}

// The checks every op shares, driven by its OpSpec.
absl::Status CheckAgainstSpec(const OpSpec& spec, absl::Span<const TensorView> inputs,
                              const Attrs& attrs) {
  if (inputs.size() != spec.inputs.size()) {
    std::vector<std::string> names;
    for (const InputSpec& in : spec.inputs) names.push_back(in.name);
    return InvalidArgumentAt("inputs",
                             absl::StrCat(spec.name, ": expects ", spec.inputs.size(), " inputs (",
                                          absl::StrJoin(names, ", "), "), got ", inputs.size()));
  }
  for (const auto& [name, value] : attrs) {
    bool known = false;
    for (const AttrSpec& a : spec.attrs) known = known || a.name == name;
    if (!known) {
      std::vector<std::string> names;
      for (const AttrSpec& a : spec.attrs) names.push_back(a.name);
      return InvalidArgumentAt(
          absl::StrCat("attrs.", name),
          absl::StrCat(spec.name, ": unknown attribute ", BoundedQuote(name),
                       "; accepted: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& in = spec.inputs[i];
    const TensorView& t = inputs[i];
    bool allowed = false;
    for (DType d : in.types) allowed = allowed || d == t.dtype;
    if (!allowed) {
      return InvalidArgumentAt(
          absl::StrCat("inputs[", i, "].dtype"),
          absl::StrCat(spec.name, ": input '", in.name, "' (inputs[", i, "]) has type ",
                       DTypeName(t.dtype), "; allowed: ", TypeList(in.types)));
    }
    const int64_t rank = t.rank();
    if (rank < in.min_rank || (in.max_rank >= 0 && rank > in.max_rank)) {
      std::string want = in.max_rank < 0 ? absl::StrCat("at least ", in.min_rank)
                         : in.min_rank == in.max_rank
                             ? absl::StrCat("exactly ", in.min_rank)
                             : absl::StrCat("between ", in.min_rank, " and ", in.max_rank);
      return InvalidArgumentAt(
          absl::StrCat("inputs[", i, "].shape"),
          absl::StrCat(spec.name, ": input '", in.name, "' (inputs[", i, "]) has rank ", rank,
                       " (shape ", ShapeToString(t.shape), "); its rank must be ", want));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TensorType>> OutputLikeFirstInput(absl::Span<const TensorView> inputs,
                                                             const Attrs&) {
  if (inputs.empty()) {
    return absl::InternalError("OutputLikeFirstInput needs an op with at least one input");
  }
  return std::vector<TensorType>{TensorType{inputs[0].dtype, inputs[0].shape}};
}

void OpRegistry::Register(OpDef def) {
  if (def.prepare == nullptr || def.infer == nullptr) {
    std::cerr << "tensorops: op " << def.spec.name << " registered without "
              << (def.prepare == nullptr ? "prepare" : "infer") << "\n";
    std::abort();
  }
  auto owned = std::make_unique<OpDef>(std::move(def));
  std::vector<std::string> names = owned->spec.aliases;
  names.push_back(owned->spec.name);
  for (const std::string& n : names) {
    if (!by_name_.emplace(n, owned.get()).second) {
      // Two ops under one name is a bug in RegisterBuiltinOps, not a caller's error.
      std::cerr << "tensorops: op name registered twice: " << n << "\n";
      std::abort();
    }
  }
  ops_.push_back(std::move(owned));
}

const OpDef* OpRegistry::Find(absl::string_view name_or_alias) const {
  auto it = by_name_.find(name_or_alias);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::StatusOr<const OpDef*> OpRegistry::CheckCall(absl::string_view op,
                                                   absl::Span<const TensorView> inputs,
                                                   const Attrs& attrs) const {
  if (op.empty()) {
    return InvalidArgumentAt("op", absl::StrCat("op is empty; known ops: ", KnownOps(ops_)));
  }
  const OpDef* def = Find(op);
  if (def == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("unknown op ", BoundedQuote(op), "; known ops: ", KnownOps(ops_)));
  }
  RETURN_IF_ERROR(CheckAgainstSpec(def->spec, inputs, attrs));
  return def;
}

absl::StatusOr<std::vector<TensorType>> OpRegistry::InferOutputs(
    absl::string_view op, absl::Span<const TensorView> inputs, const Attrs& attrs) const {
  ASSIGN_OR_RETURN(const OpDef* def, CheckCall(op, inputs, attrs));
  return def->infer(inputs, attrs);
}

absl::StatusOr<PreparedOp> OpRegistry::Prepare(absl::string_view op,
                                               absl::Span<const TensorView> inputs,
                                               const Attrs& attrs) const {
  ASSIGN_OR_RETURN(const OpDef* def, CheckCall(op, inputs, attrs));
  ASSIGN_OR_RETURN(std::vector<TensorType> outputs, def->infer(inputs, attrs));
  ASSIGN_OR_RETURN(PreparedOp prepared, def->prepare(inputs, attrs));
  // A PreparedOp writes one output; it must be the one inference promised,
  // since callers size buffers and budgets from the inference.
  if (outputs.size() != 1 || outputs[0] != TensorType{prepared.dtype, prepared.shape}) {
    return absl::InternalError(
        absl::StrCat(def->spec.name, ": the kernel plans an output of ", DTypeName(prepared.dtype),
                     " ", ShapeToString(prepared.shape), " but the op's inference gives ",
                     outputs.size(), " output(s)",
                     outputs.empty() ? ""
                                     : absl::StrCat(", the first ", DTypeName(outputs[0].dtype),
                                                    " ", ShapeToString(outputs[0].shape))));
  }
  return prepared;
}

namespace {

// A step's field path from its op's: the step's own inputs follow the
// chained data (the op's inputs[0], no field of the request: the step itself
// is named), its attrs and op are the step's.
std::string StepFieldPath(size_t i, absl::string_view op_path) {
  const std::string step = absl::StrCat("then[", i, "]");
  int64_t input = 0;
  absl::string_view rest;
  if (op_path.empty()) return step;
  if (SplitIndexedPath(op_path, "inputs", &input, &rest)) {
    return input == 0 ? step : absl::StrCat(step, ".inputs[", input - 1, "]", rest);
  }
  return absl::StrCat(step, ".", op_path);
}

// "then[2] (Roll): " before a step's error; the op's own "Roll: " prefix
// goes, since the step already names it. Its field path becomes the step's.
absl::Status InStep(size_t i, const OpDef* def, const absl::Status& s) {
  absl::string_view msg = s.message();
  std::string where = absl::StrCat("then[", i, "]");
  if (def != nullptr) {
    absl::ConsumePrefix(&msg, absl::StrCat(def->spec.name, ": "));
    absl::StrAppend(&where, " (", def->spec.name, ")");
  }
  return WithErrorFieldPath(absl::Status(s.code(), absl::StrCat(where, ": ", msg)),
                            StepFieldPath(i, ErrorFieldPath(s).value_or("")));
}

}  // namespace

absl::Status CheckChainLength(int64_t steps) {
  if (steps <= kMaxChainSteps) return absl::OkStatus();
  return InvalidArgumentAt("then", absl::StrCat("then has ", steps, " steps; a chain has at most ",
                                                kMaxChainSteps, " after its first op"));
}

absl::StatusOr<std::vector<Movement>> OpRegistry::CheckChain(
    const TensorType& first_output, absl::Span<const ChainStep> then,
    std::vector<const OpDef*>* defs) const {
  RETURN_IF_ERROR(CheckChainLength(static_cast<int64_t>(then.size())));
  std::vector<Movement> movements;
  movements.reserve(then.size());
  TensorType current = first_output;
  std::vector<TensorView> inputs;
  for (size_t i = 0; i < then.size(); ++i) {
    const ChainStep& step = then[i];
    inputs.clear();
    inputs.push_back(TensorView{current.dtype, current.shape, nullptr});
    inputs.insert(inputs.end(), step.inputs.begin(), step.inputs.end());
    const OpDef* def = Find(step.op);
    if (absl::StatusOr<const OpDef*> checked = CheckCall(step.op, inputs, step.attrs);
        !checked.ok()) {
      return InStep(i, def, checked.status());
    }
    if (def->movement == nullptr) {
      return InStep(i, def,
                    absl::UnimplementedError(absl::StrCat(
                        def->spec.name, " describes no movement, so it cannot be a chain step")));
    }
    absl::StatusOr<Movement> m = def->movement(inputs, step.attrs);
    if (!m.ok()) return InStep(i, def, m.status());
    absl::StatusOr<std::vector<TensorType>> out = def->infer(inputs, step.attrs);
    if (!out.ok()) return InStep(i, def, out.status());
    // Movement ops keep type and shape; anything else is a bug in the op.
    if (out->size() != 1 || (*out)[0] != current) {
      return InStep(i, def,
                    absl::InternalError("a movement op changed its output's type or shape"));
    }
    movements.push_back(*std::move(m));
    if (defs != nullptr) defs->push_back(def);
  }
  return movements;
}

absl::StatusOr<PreparedOp> OpRegistry::PrepareChain(absl::string_view op,
                                                    absl::Span<const TensorView> inputs,
                                                    const Attrs& attrs,
                                                    absl::Span<const ChainStep> then) const {
  if (then.empty()) return Prepare(op, inputs, attrs);
  ASSIGN_OR_RETURN(const OpDef* def, CheckCall(op, inputs, attrs));
  ASSIGN_OR_RETURN(std::vector<TensorType> outputs, def->infer(inputs, attrs));
  if (def->movement == nullptr || outputs.size() != 1 ||
      outputs[0] != TensorType{inputs[0].dtype, inputs[0].shape}) {
    return absl::UnimplementedError(
        absl::StrCat(def->spec.name, " describes no movement, so it cannot start a chain"));
  }
  std::vector<Movement> movements;
  movements.reserve(then.size() + 1);
  ASSIGN_OR_RETURN(Movement first, def->movement(inputs, attrs));
  movements.push_back(std::move(first));
  std::vector<const OpDef*> defs;
  ASSIGN_OR_RETURN(std::vector<Movement> rest, CheckChain(outputs[0], then, &defs));
  for (Movement& m : rest) movements.push_back(std::move(m));
  PreparedOp prepared = PlanMovements(inputs[0].dtype, inputs[0].shape, inputs[0].data, movements);
  prepared.chain = std::move(defs);
  return prepared;
}

absl::StatusOr<Tensor> ExecuteOp(const OpRegistry& registry, absl::string_view op,
                                 absl::Span<const TensorView> inputs, const Attrs& attrs) {
  ASSIGN_OR_RETURN(PreparedOp prepared, registry.Prepare(op, inputs, attrs));
  Tensor out(prepared.dtype, prepared.shape);
  prepared.Run(out.mutable_data());
  return out;
}

}  // namespace tensorops
