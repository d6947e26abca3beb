#include "server/v1/execution.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/status_macros.h"
#include "wire/attrs_codec.h"
#include "wire/chain_codec.h"

namespace tensorops {

absl::StatusOr<std::unique_ptr<PreparedExecution>> PreparedExecution::Make(
    const OpRegistry& registry, const v1::ExecuteRequest& request, const RequestLimits& limits) {
  std::unique_ptr<PreparedExecution> exec(new PreparedExecution());
  exec->inputs_.reserve(request.inputs_size());
  std::vector<TensorView> views;
  views.reserve(request.inputs_size());
  // Decoded input bytes so far; each term is at most max_tensor_bytes and the
  // sum stops growing once past max_request_bytes, so it cannot overflow.
  int64_t request_bytes = 0;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string what = absl::StrCat("inputs[", i, "]");
    ASSIGN_OR_RETURN(DecodedTensor t,
                     AtField(DecodeTensor(request.inputs(i), what, &limits), what));
    const int64_t bytes = DecodedBytes(t.view);
    if (bytes > limits.max_request_bytes - request_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "request inputs[0..", i, "] need more than ", limits.max_request_bytes,
          " bytes decoded; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
    }
    request_bytes += bytes;
    views.push_back(t.view);
    exec->inputs_.push_back(std::move(t));
  }
  // A chain's steps: their own (small) inputs decoded under the same limits.
  ASSIGN_OR_RETURN(std::vector<ChainStep> steps,
                   DecodeChain(request.then(), limits, &request_bytes, &exec->inputs_));
  // The kernels name op inputs; the caller sees the request's own fields.
  absl::StatusOr<PreparedOp> op =
      registry.PrepareChain(request.op(), views, DecodeAttrs(request.attrs()), steps);
  if (!op.ok()) {
    return MapErrorFieldPath(op.status(), [&request](absl::string_view path) {
      return ExecuteFieldPath(request.inputs(), request.then(), path);
    });
  }
  exec->op_ = *std::move(op);
  // The output (and a chain's scratch) is allocated only when the kernel
  // runs; count it now.
  const int64_t run_bytes = exec->output_bytes() + exec->op_.scratch_bytes();
  if (run_bytes > limits.max_request_bytes - request_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request needs ", request_bytes, " bytes of decoded inputs plus ", run_bytes,
                     " bytes of output", exec->op_.scratch_bytes() > 0 ? " and scratch" : "",
                     "; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
  }
  // The reply's encoding (raw or typed fields) mirrors the first input's: the
  // protocol's rule, whatever the output's type (which Prepare checked
  // against the op's inference).
  if (!exec->inputs_.empty()) exec->encoding_ = exec->inputs_[0].encoding;
  return exec;
}

int64_t PreparedExecution::output_bytes() const {
  return NumElements(op_.shape) * ElementWidth(op_.dtype);
}

void PreparedExecution::Run(v1::ExecuteResponse* response, ThreadPool* pool,
                            int64_t min_parallel_bytes) {
  v1::Tensor* out = response->add_outputs();
  if (encoding_ == Encoding::kRaw && op_.dtype != DType::kString) {
    RunPrepared(op_, AllocateRawOutput(op_.dtype, op_.shape, out), pool, min_parallel_bytes);
    return;
  }
  // Typed fields and STRING need a conversion pass anyway; run into a buffer first.
  Tensor result(op_.dtype, op_.shape);
  RunPrepared(op_, result.mutable_data(), pool, min_parallel_bytes);
  EncodeTensor(result.view(), encoding_, out);
}

void PreparedExecution::RunRaw(void* out, ThreadPool* pool, int64_t min_parallel_bytes) {
  RunPrepared(op_, out, pool, min_parallel_bytes);
}

absl::Status Execute(const OpRegistry& registry, const v1::ExecuteRequest& request,
                     v1::ExecuteResponse* response, const RequestLimits& limits) {
  ASSIGN_OR_RETURN(auto exec, PreparedExecution::Make(registry, request, limits));
  exec->Run(response);
  return absl::OkStatus();
}

void DescribeOps(const OpRegistry& registry, v1::ListOpsResponse* response) {
  for (const auto& def : registry.ops()) {
    const OpSpec& spec = def->spec;
    v1::OpInfo* info = response->add_ops();
    info->set_name(spec.name);
    for (const auto& a : spec.aliases) info->add_aliases(a);
    info->set_description(spec.description);
    for (const InputSpec& in : spec.inputs) {
      v1::InputInfo* i = info->add_inputs();
      i->set_name(in.name);
      i->set_description(in.description);
      for (DType d : in.types) i->add_allowed_types(ToProtoDataType(d));
      i->set_min_rank(in.min_rank);
      i->set_max_rank(in.max_rank);
    }
    for (const AttrSpec& a : spec.attrs) {
      v1::AttributeInfo* ai = info->add_attributes();
      ai->set_name(a.name);
      ai->set_type(a.type);
      ai->set_description(a.description);
      ai->set_required(a.required);
      ai->set_default_value(a.default_value);
      ai->set_range(a.range);
    }
    for (const OutputSpec& o : spec.outputs) {
      v1::OutputInfo* oi = info->add_outputs();
      oi->set_name(o.name);
      oi->set_description(o.description);
      if (def->infer == &OutputLikeFirstInput) oi->set_like_input(spec.inputs.front().name);
    }
  }
}

}  // namespace tensorops
