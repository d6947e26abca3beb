#include "server/core/call.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/logging.h"
#include "wire/status_details.h"

namespace tensorops {
namespace {

// Equality whose time depends only on expected.size(), not on where `given`
// differs from it.
bool ConstantTimeEquals(absl::string_view given, absl::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

// The status as the RPC ends with it: codes outside the canonical 0..16
// (absl allows any int) become UNKNOWN, as on gRPC's wire (wire/status.h),
// so metrics, logs and every door see the same code.
absl::Status CanonicalStatus(const absl::Status& status) {
  const int code = static_cast<int>(status.code());
  if (code >= 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)) return status;
  return absl::Status(absl::StatusCode::kUnknown, status.message());
}

Metrics::Limit MetricsLimit(AdmissionController::Limit limit) {
  return limit == AdmissionController::Limit::kQueue ? Metrics::Limit::kQueue
                                                     : Metrics::Limit::kInflightBytes;
}

}  // namespace

CallPipeline::CallPipeline(const OpRegistry* registry, ThreadPool* pool,
                           AdmissionController* admission, Metrics* metrics, Options options)
    : registry_(registry),
      pool_(pool),
      admission_(admission),
      metrics_(metrics),
      options_(std::move(options)),
      expected_authorization_(options_.auth_token.empty()
                                  ? std::string()
                                  : absl::StrCat("Bearer ", options_.auth_token)) {}

absl::Status CallPipeline::Gate(const CallContext& ctx) {
  // gRPC's retry machinery marks every attempt after the first.
  if (ctx.retried()) metrics_->RecordRetriedCall();
  if (!expected_authorization_.empty()) {
    const std::optional<absl::string_view> authorization = ctx.authorization();
    if (!authorization.has_value()) {
      const absl::string_view carrier = ctx.authorization_carrier();
      return absl::UnauthenticatedError(absl::StrCat("missing \"authorization: Bearer <token>\"",
                                                     carrier.empty() ? "" : " ", carrier));
    }
    if (!ConstantTimeEquals(*authorization, expected_authorization_)) {
      // Never echo what was sent or expected.
      return absl::UnauthenticatedError("invalid bearer token");
    }
  }
  if (draining_.load()) return DrainingError("server is shutting down");
  return absl::OkStatus();
}

absl::Status CallPipeline::Reserve(int64_t bytes, AdmissionTicket* reservation) {
  AdmissionController::Limit limit;
  absl::Status s;
  if (reservation->held()) {
    s = reservation->Resize(bytes, &limit);
  } else {
    absl::StatusOr<AdmissionTicket> t = admission_->Reserve(bytes, &limit);
    if (t.ok()) *reservation = *std::move(t);
    s = t.status();
  }
  if (!s.ok() && limit != AdmissionController::Limit::kNone) {
    metrics_->RecordRejected(MetricsLimit(limit));
  }
  return s;
}

Call::Call(CallPipeline* pipeline, const CallMethod* method, const CallContext* ctx,
           FinishRpc finish_rpc)
    : pipeline_(pipeline),
      method_(method),
      ctx_(ctx),
      finish_rpc_(std::move(finish_rpc)),
      start_(absl::Now()),
      trace_(TraceContext::Start(ctx->trace_fields())),
      op_index_(pipeline->metrics_->unknown_op_index()) {
  if (pipeline->options_.spans != nullptr) {
    record_span_ = pipeline->options_.sampler.ShouldSample(trace_);
    trace_.set_sampled(record_span_);  // a new trace's flags say the sampler's pick
  }
}

void Call::RunUnary(absl::string_view op, int64_t request_bytes, PrepareFn prepare,
                    ReplyBytesFn reply_bytes) {
  const LogCallScope log_scope(trace_.trace_id_hex(), trace_.span_id_hex());
  request_bytes_ = request_bytes;
  reply_bytes_ = std::move(reply_bytes);
  SetOp(op, pipeline_->registry_->Find(op));
  absl::Status status = Open();
  if (status.ok()) {
    absl::StatusOr<std::unique_ptr<PreparedCall>> prepared = prepare();
    if (prepared.ok()) {
      prepared_ = *std::move(prepared);
    } else {
      status = prepared.status();
    }
  }
  if (!status.ok()) {
    EndUnary(status);
    return;
  }
  timeout_ = prepared_->timeout();
  // Admitted, the call runs from the pool, as any queued call does (it may
  // have waited for the budget on another thread); refused, it ends there
  // and then (through the pool its refusal would wait for the very kernels
  // that hold the budget).
  AdmitOrWait(request_bytes_ + prepared_->output_bytes() + prepared_->scratch_bytes(),
              AdmissionController::Queue::kNow, [this](absl::Status s, bool waited) {
                if (!s.ok()) {
                  EndUnary(s);  // may delete this Call
                } else if (!waited) {
                  RunAdmitted();
                } else {
                  pipeline_->pool_->Schedule([this] {
                    const LogCallScope log_scope(trace_.trace_id_hex(), trace_.span_id_hex());
                    queued_at_ = absl::Now();
                    RunAdmitted();
                  });
                }
              });
}

void Call::AdmitOrWait(int64_t budget_bytes, AdmissionController::Queue queue,
                       AdmittedFn admitted) {
  AdmissionController::Limit limit = AdmissionController::Limit::kNone;
  absl::Status status = TryAdmit(budget_bytes, queue, &limit);
  if (limit == AdmissionController::Limit::kInflightBytes &&
      pipeline_->options_.budget_wait > absl::ZeroDuration() &&
      ErrorReason(status) == "INFLIGHT_BYTES_EXHAUSTED") {
    WaitForBudget(budget_bytes, queue, std::move(status), std::move(admitted));
    return;
  }
  // kNone: admission is closed (the drain), not a limit.
  if (limit != AdmissionController::Limit::kNone) {
    pipeline_->metrics_->RecordRejected(MetricsLimit(limit));
  }
  std::move(admitted)(std::move(status), /*waited=*/false);
}

void Call::WaitForBudget(int64_t bytes, AdmissionController::Queue queue, absl::Status refusal,
                         AdmittedFn admitted) {
  const absl::Time until = std::min(
      {absl::Now() + pipeline_->options_.budget_wait, ctx_->deadline(), start_ + timeout_});
  // A gRPC message arrived whole before its call asked: it is in memory, and
  // no ticket counts it while it waits. An HTTP body's reservation does; a
  // stream's header is all a streamed call holds before it is admitted.
  const int64_t held = std::max<int64_t>(0, request_bytes_ - ticket_.bytes());
  // The wait ends on whichever thread freed the bytes (a door's, the pool's)
  // or the controller's timer.
  pipeline_->admission_->WaitForBytes(
      &ticket_, bytes, queue, held, until, std::move(refusal),
      [ctx = ctx_] { return ctx->cancelled(); },
      [this, admitted = std::move(admitted)](absl::Status s) mutable {
        const LogCallScope log_scope(trace_.trace_id_hex(), trace_.span_id_hex());
        if (!s.ok()) {
          const std::optional<std::string> reason = ErrorReason(s);
          if (reason == "INFLIGHT_BYTES_EXHAUSTED") {
            pipeline_->metrics_->RecordRejected(Metrics::Limit::kInflightBytes);
          } else if (reason == "QUEUE_FULL") {
            pipeline_->metrics_->RecordRejected(Metrics::Limit::kQueue);
          }
        }
        std::move(admitted)(std::move(s), /*waited=*/true);  // may delete this Call
      });
}

void Call::RunAdmitted() {
  Run(
      prepared_->output_bytes(),
      [this](ThreadPool* pool, int64_t min_parallel_bytes) {
        absl::Status s = prepared_->Run(pool, min_parallel_bytes);
        if (s.ok()) RecordChainSteps(prepared_->chain());
        return s;
      },
      [this](absl::Status status) { EndUnary(status); });
}

void Call::EndUnary(const absl::Status& status) {
  prepared_.reset();  // views of the request and region references: gone before the RPC ends
  const int64_t bytes_out = status.ok()    ? reply_bytes_()
                            : error_bytes_ ? error_bytes_(CanonicalStatus(status))
                                           : 0;
  Finish(status, request_bytes_, bytes_out);  // may delete this Call: nothing after it
}

absl::Status Call::Open() { return pipeline_->Gate(*ctx_); }

void Call::SetOp(absl::string_view requested, const OpDef* def) {
  op_text_ = std::string(requested.substr(0, 64));
  // Aliases ("Roll-7") count under their op's canonical name.
  op_index_ = def != nullptr ? pipeline_->metrics_->OpIndex(def->spec.name)
                             : pipeline_->metrics_->unknown_op_index();
}

absl::Status Call::TryAdmit(int64_t budget_bytes, AdmissionController::Queue queue,
                            AdmissionController::Limit* limit) {
  absl::Status s;
  if (ticket_.held() && !ticket_.request()) {
    // HoldReservation: the request's bytes are already counted.
    s = ticket_.AdmitReserved(budget_bytes, queue, limit);
  } else {
    absl::StatusOr<AdmissionTicket> ticket =
        pipeline_->admission_->Admit(budget_bytes, queue, limit);
    if (ticket.ok()) ticket_ = *std::move(ticket);
    s = ticket.status();
  }
  if (s.ok() && queue == AdmissionController::Queue::kNow) queued_at_ = absl::Now();
  return s;
}

absl::Status Call::Admit(int64_t budget_bytes, AdmissionController::Queue queue) {
  AdmissionController::Limit limit = AdmissionController::Limit::kNone;
  absl::Status s = TryAdmit(budget_bytes, queue, &limit);
  // kNone: admission is closed (the drain), not a limit.
  if (!s.ok() && limit != AdmissionController::Limit::kNone) {
    pipeline_->metrics_->RecordRejected(MetricsLimit(limit));
  }
  return s;
}

absl::Status Call::EnterQueue() {
  AdmissionController::Limit limit;
  if (absl::Status s = ticket_.EnterQueue(&limit); !s.ok()) {
    if (limit != AdmissionController::Limit::kNone) {
      pipeline_->metrics_->RecordRejected(MetricsLimit(limit));
    }
    return s;
  }
  queued_at_ = absl::Now();
  return absl::OkStatus();
}

void Call::Run(int64_t output_bytes, KernelFn kernel, AfterFn after) {
  kernel_ = std::move(kernel);
  after_ = std::move(after);
  // Small outputs (--inline_max_bytes, kDefaultInlineMaxBytes) run on this
  // gRPC thread: their kernel is shorter than the hand-off to the pool and a
  // pool thread's wake-up (docs/benchmarks-history.md, issue 3 session,
  // "Where tensorops loses, and the fixes", fix 1).
  if (output_bytes < pipeline_->options_.inline_max_bytes) {
    RunNow();
  } else {
    pipeline_->pool_->Schedule([this] { RunNow(); });
  }
}

absl::Status Call::CheckDrop(absl::Time now) {
  Metrics* metrics = pipeline_->metrics_;
  if (pipeline_->aborting_.load()) {
    metrics->RecordDropped(op_index_, Metrics::DropReason::kShutdown);
    return DrainingError("server is shutting down; the request was not run");
  }
  // Checked before IsCancelled: a call whose deadline passed is usually
  // cancelled too (its client cancels at its deadline).
  if (ctx_->deadline() < now) {
    metrics->RecordDropped(op_index_, Metrics::DropReason::kDeadline);
    return absl::DeadlineExceededError(
        "deadline passed while the request was queued; it was not run");
  }
  if (start_ + timeout_ < now) {
    metrics->RecordDropped(op_index_, Metrics::DropReason::kDeadline);
    return absl::DeadlineExceededError(
        absl::StrCat("the request's timeout parameter (", absl::ToInt64Microseconds(timeout_),
                     " us) passed while it was queued; it was not run"));
  }
  if (ctx_->cancelled()) {
    metrics->RecordDropped(op_index_, Metrics::DropReason::kCancelled);
    return absl::CancelledError("request cancelled before it ran");
  }
  return absl::OkStatus();
}

void Call::RunNow() {
  const LogCallScope log_scope(trace_.trace_id_hex(), trace_.span_id_hex());
  ticket_.LeaveQueue();
  if (!pipeline_->options_.test_kernel_gate.empty()) {
    // Tests only: hold the kernel while the gate file exists (see Options).
    struct stat st;
    while (stat(pipeline_->options_.test_kernel_gate.c_str(), &st) == 0) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  const absl::Time kernel_start = absl::Now();
  absl::Status status = CheckDrop(kernel_start);
  if (status.ok()) {
    status = kernel_(pipeline_->pool_, pipeline_->options_.min_parallel_bytes);
    kernel_start_ = kernel_start;
    timing_.queue = kernel_start - queued_at_;
    timing_.kernel = absl::Now() - kernel_start;
    pipeline_->metrics_->RecordKernel(op_index_, absl::ToDoubleSeconds(*timing_.queue),
                                      absl::ToDoubleSeconds(*timing_.kernel));
  }
  kernel_ = nullptr;  // may hold views of the request: done with them
  // `after` may finish the call, which may delete this Call: move it out first.
  AfterFn after = std::move(after_);
  after(std::move(status));
}

void Call::ExportSpan(const absl::Status& status, int64_t bytes_in, int64_t bytes_out) {
  SpanRecord span;
  span.SetTrace(trace_);
  span.convention = &method_->spec().span;
  span.op = op_text_;
  span.start = start_;
  span.end = start_ + timing_.total;
  if (timing_.kernel.has_value()) {
    span.queue_start = queued_at_;
    span.kernel_start = kernel_start_;
    span.kernel_end = kernel_start_ + *timing_.kernel;
  }
  span.code = status.code();
  if (!status.ok()) span.message = std::string(status.message());
  span.bytes_in = bytes_in;
  span.bytes_out = bytes_out;
  pipeline_->options_.spans->Export(std::move(span));
}

void Call::Finish(const absl::Status& status, int64_t bytes_in, int64_t bytes_out) {
  if (finished_) return;
  finished_ = true;
  const LogCallScope log_scope(trace_.trace_id_hex(), trace_.span_id_hex());
  timing_.total = absl::Now() - start_;
  const double seconds = absl::ToDoubleSeconds(timing_.total);
  const absl::Status rpc_status = CanonicalStatus(status);
  pipeline_->metrics_->RecordCall(method_, op_index_, rpc_status.code(), seconds, bytes_in,
                                  bytes_out);
  if (!status.ok()) {
    LogRequestError(rpc_status.code(), op_text_, std::string(rpc_status.message()));
  }
  if (pipeline_->options_.access_log) {
    // The method's own names for its byte counts (CallMethodSpec).
    const CallMethodSpec& m = method_->spec();
    Log(LogLevel::kInfo, absl::StrCat("access method=", m.name, " op=", op_text_,
                                      " code=", StatusCodeName(rpc_status.code()), " ",
                                      m.log_bytes_in, "=", bytes_in, " ", m.log_bytes_out, "=",
                                      bytes_out, " us=", static_cast<int64_t>(seconds * 1e6)));
  }
  if (record_span_) {
    ExportSpan(rpc_status, bytes_in, bytes_out);
  }
  // The admission ticket is not given back here but when the Call is
  // destroyed (when gRPC is done with the RPC): until gRPC has handed the reply to the
  // transport it still holds its bytes, and the drain's "nothing in flight"
  // means every admitted reply has left.
  // Last: once the RPC is finished gRPC may be done with it and delete this Call.
  FinishRpc finish_rpc = std::move(finish_rpc_);
  finish_rpc(rpc_status);
}

}  // namespace tensorops
