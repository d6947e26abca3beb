// One request pipeline for every front door.
//
// A front door (Execute, ExecuteStream, later others) only translates its
// wire format into an op call (op name, inputs, attributes) and the result
// back. Everything else a call goes through lives here, once:
//
//   Open()        the bearer token and the drain gate;
//   SetOp()       the op the call names (metrics label, access log);
//   Admit()       admission control: an AdmissionTicket (RAII) for the call's
//                 bytes and, with Queue::kNow, a queue slot; refusals counted;
//   EnterQueue()  the queue slot of a call admitted with Queue::kLater (a
//                 streamed call whose upload just completed);
//   Run()         run-or-drop: inline on the calling thread (small outputs,
//                 --inline_max_bytes) or as one task on the kernel pool; the
//                 task leaves the queue, drops the call (UNAVAILABLE on a
//                 drain abort, DEADLINE_EXCEEDED, CANCELLED) or runs the
//                 kernel, timing queue and kernel;
//   Finish()      exactly once: request metrics, the error log, the access
//                 log, then the RPC's own finish;
//   ~Call()       once the door is done with the RPC (gRPC: a unary call's
//                 message holder is released, server/grpc/unary_call.h; a
//                 stream reactor's OnDone): the ticket goes back once the
//                 reply has been handed to the transport (the drain waits).
//
// CallPipeline is the state every call shares (registry, pool, admission,
// metrics, options, drain flags); one per service.
//
// A unary front door (Execute, ModelInfer, each ModelStreamInfer message)
// writes none of these steps: it hands RunUnary a `prepare` function that
// decodes and validates its request into a PreparedCall (output bytes, run
// into the reply), and RunUnary runs Open -> prepare -> Admit -> Run -> Finish:
//   GrpcCallContext call_context(ctx);  // server/grpc/grpc_call_context.h
//   Call call(pipeline, methods.execute, &call_context,  // its door's CallMethod
//             [reactor](const absl::Status& s) { reactor->Finish(ToGrpcStatus(s)); });
//   call.RunUnary(request.op(), request.ByteSizeLong(),
//                 [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
//                   ASSIGN_OR_RETURN(auto exec, PreparedExecution::Make(...));
//                   return IntoReply(std::move(exec), response);
//                 },
//                 [response] { return response->ByteSizeLong(); });
// A streamed call (ExecuteStream) uses the steps one by one: it admits with
// Queue::kLater, enters the queue when its upload completes, and sends after Run.
//
// The core speaks no RPC framework: a door hands each Call its CallContext
// (call_context.h) and maps the absl::Status it finishes with to its own
// wire status.
//
// Thread-safety: CallPipeline is safe from any thread. A Call belongs to one
// RPC whose steps run one after another (gRPC serialises a reactor's
// callbacks; Run hands the call to one pool task), so its methods are never
// called concurrently and it takes no lock.
#ifndef TENSOROPS_SERVER_CORE_CALL_H_
#define TENSOROPS_SERVER_CORE_CALL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/core/admission.h"
#include "server/core/call_context.h"
#include "server/core/metrics.h"
#include "server/core/span_export.h"
#include "server/core/trace.h"
#include "wire/limits.h"

namespace tensorops {

// Default of --inline_max_bytes: calls whose output is smaller run on the
// gRPC thread that received them. Below ~1 MiB the kernel takes less time
// than the hand-off to the pool and the wake-up of a pool thread, and a lone
// small call pays that hand-off twice (there and, for Finish, back); with
// 1-2 MiB the c=1 cells went from 0.56-0.98x of a bare gRPC echo to
// 0.81-1.06x (docs/benchmarks-history.md, "Issue 19 session (2026-11-25):
// lone small calls"). A call at or above it still runs its kernel split
// across the pool.
inline constexpr int64_t kDefaultInlineMaxBytes = int64_t{1} << 20;

// Default of CallPipeline::Options::budget_wait (--budget_wait). Both doors
// share one budget and a REST body takes its bytes when its header arrives,
// a gRPC message only once it has arrived whole: under a mixed burst in a
// 1 GiB container the REST calls held the whole budget when the gRPC calls
// came, and all 16 gRPC calls were refused. Waiting (first come, first
// served) lets the later door in as soon as the earlier one's calls finish.
// Those REST calls held the budget while their bodies arrived, 4.5-5.0 s
// under that burst (docs/reliability.md, "Memory limit"): with 1 s the gRPC
// calls that came ~1 s later were all refused, the message each had already
// received thrown away. A caller's deadline bounds the wait too, and what
// the waiters hold is bounded by the budget (AdmissionController::
// WaitForBytes), so a longer wait costs time, not memory.
inline constexpr absl::Duration kDefaultBudgetWait = absl::Seconds(10);

// What every call of one service shares.
class CallPipeline {
 public:
  struct Options {
    bool access_log = false;  // one log line per call
    // Output size from which one call's kernel is split across the pool.
    int64_t min_parallel_bytes = kDefaultMinParallelBytes;
    // Outputs smaller than this run on the thread that calls Run (a gRPC
    // thread) instead of the pool; 0 keeps every kernel on the pool.
    int64_t inline_max_bytes = kDefaultInlineMaxBytes;
    RequestLimits limits;  // per-request size limits (wire/limits.h)
    // Non-empty: every call must carry "authorization: Bearer <auth_token>",
    // else UNAUTHENTICATED.
    std::string auth_token;
    // Tests only (--test_only_kernel_gate): while this file exists, every
    // kernel task waits, after leaving the queue and before its drop check,
    // so a test holds the pool deterministically. Empty (the default): off.
    std::string test_kernel_gate;
    // When doors send a call's traceparent back and its Server-Timing
    // (--trace_headers): kAuto (the default) for a call that arrived with a
    // sampled traceparent, a caller that traces; kOn for every call; kOff
    // never. Trace ids in the logs do not depend on it. A call that sends
    // no traceparent pays nothing for it (docs/server.md "Tracing").
    TraceHeaders trace_headers = TraceHeaders::kAuto;
    // Not null (--otlp_endpoint, OTEL_EXPORTER_OTLP_*ENDPOINT): the span
    // of every call `sampler` picks goes there at Finish. Not owned; must
    // outlive every call.
    SpanExporter* spans = nullptr;
    Sampler sampler;  // OTEL_TRACES_SAMPLER, _ARG
    // How long a unary call, or a stream at its header, refused only because
    // the in-flight budget is busy waits for it (Call::AdmitOrWait; also
    // bounded by the call's deadline) before its refusal goes out; 0: refused
    // at once.
    absl::Duration budget_wait = kDefaultBudgetWait;
  };

  // None of the pointers is owned; all must outlive the pipeline and every call.
  CallPipeline(const OpRegistry* registry, ThreadPool* pool, AdmissionController* admission,
               Metrics* metrics, Options options);

  const OpRegistry& registry() const { return *registry_; }
  const RequestLimits& limits() const { return options_.limits; }
  Metrics* metrics() const { return metrics_; }

  // The bearer token (UNAUTHENTICATED), then the drain gate (UNAVAILABLE);
  // counts a retried call (CallContext::retried). For calls outside the
  // Call lifecycle (ListOps) as for those inside it.
  absl::Status Gate(const CallContext& ctx);

  // Request bytes a door holds before its call is prepared (an HTTP body as
  // it arrives), counted against --max_inflight_bytes before they are
  // taken: `*reservation` (empty: a new AdmissionController::Reserve) comes
  // to hold `bytes` in all. Refusals are RESOURCE_EXHAUSTED naming the
  // budget (counted in tensorops_rejected_requests_total) or UNAVAILABLE
  // while draining; the reservation then stays as it was. Hand it to the
  // call with Call::HoldReservation.
  absl::Status Reserve(int64_t bytes, AdmissionTicket* reservation);

  // Drain, step 1: new calls are refused with UNAVAILABLE from now on.
  void StartDraining() { draining_.store(true); }
  // Drain, step 2 (drain timeout passed): queued calls are dropped with
  // UNAVAILABLE instead of running.
  void AbortQueued() { aborting_.store(true); }
  // True from StartDraining on (the Open Inference Protocol's ServerReady
  // answers false then, as grpc.health.v1 answers NOT_SERVING).
  bool draining() const { return draining_.load(); }

 private:
  friend class Call;

  const OpRegistry* const registry_;
  ThreadPool* const pool_;
  AdmissionController* const admission_;
  Metrics* const metrics_;
  const Options options_;
  // "Bearer <token>", built once (empty when no token is configured).
  const std::string expected_authorization_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> aborting_{false};
};

// A call its front door has decoded and validated, ready to admit and run.
// It holds views of the request (kept alive by the front door) and writes
// the front door's reply. Destroyed before the call finishes.
class PreparedCall {
 public:
  virtual ~PreparedCall() = default;
  // Bytes of output the kernel writes (admission; inline or on the pool).
  virtual int64_t output_bytes() const = 0;
  // Bytes the kernel needs besides its output (a chain run in passes).
  virtual int64_t scratch_bytes() const { return 0; }
  // A chain's ops after the first (metrics); empty for a single op.
  virtual absl::Span<const OpDef* const> chain() const { return {}; }
  // Runs the kernel, splitting it across `pool` from `min_parallel_bytes` of
  // output, and writes the result into the reply.
  virtual absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) = 0;
  // How long after its arrival the call may still start its kernel (the
  // Open Inference Protocol's `timeout` parameter); past it, a queued call is
  // dropped with DEADLINE_EXCEEDED like one whose RPC deadline passed.
  virtual absl::Duration timeout() const { return absl::InfiniteDuration(); }
};

// A PreparedCall of a prepared op whose Run(reply, pool, min_parallel_bytes)
// writes `reply` (PreparedExecution, PreparedInfer). `reply` must outlive it.
template <typename Prepared, typename Reply>
std::unique_ptr<PreparedCall> IntoReply(std::unique_ptr<Prepared> prepared, Reply* reply) {
  class Bound final : public PreparedCall {
   public:
    Bound(std::unique_ptr<Prepared> p, Reply* r) : prepared_(std::move(p)), reply_(r) {}
    int64_t output_bytes() const override { return prepared_->output_bytes(); }
    int64_t scratch_bytes() const override { return prepared_->scratch_bytes(); }
    absl::Span<const OpDef* const> chain() const override { return prepared_->chain(); }
    absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
      if constexpr (std::is_void_v<decltype(prepared_->Run(reply_, pool, min_parallel_bytes))>) {
        prepared_->Run(reply_, pool, min_parallel_bytes);
        return absl::OkStatus();
      } else {
        return prepared_->Run(reply_, pool, min_parallel_bytes);
      }
    }

   private:
    std::unique_ptr<Prepared> prepared_;
    Reply* reply_;
  };
  return std::make_unique<Bound>(std::move(prepared), reply);
}

// One RPC of a front door, from arrival to finish. See the file comment.
class Call {
 public:
  // Finishes the RPC itself (reactor->Finish), mapping the status to the
  // door's wire status; called once, from Finish. The status's code is one
  // of the canonical 0..16 (any other became UNKNOWN).
  using FinishRpc = absl::AnyInvocable<void(const absl::Status&)>;
  // The kernel: runs the prepared op (splitting it across `pool` from
  // `min_parallel_bytes` of output) and encodes or stores its result.
  using KernelFn = absl::AnyInvocable<absl::Status(ThreadPool* pool, int64_t min_parallel_bytes)>;
  // What happens after Run: `status` is the kernel's, or why the call was
  // dropped. Usually ends in Finish (or, for a stream, starts sending).
  using AfterFn = absl::AnyInvocable<void(absl::Status status)>;
  // A unary front door's decode and validation (see RunUnary).
  using PrepareFn = absl::FunctionRef<absl::StatusOr<std::unique_ptr<PreparedCall>>()>;
  // The size of the reply once it is written (bytes_out of a successful call).
  using ReplyBytesFn = absl::AnyInvocable<int64_t() const>;
  // The size of the reply a door sends for a failed unary call, given the
  // status the call ends with (bytes_out of a failed call: REST's error
  // JSON). Without one, 0 (a gRPC failure has no message).
  using ErrorBytesFn = absl::AnyInvocable<int64_t(const absl::Status& status)>;

  // Stamps the arrival time. `pipeline` and `ctx` (the door's view of the
  // RPC: credentials, deadline, cancellation) must outlive the call.
  // Owned by the front door (a unary RPC's message holder, a stream's
  // reactor, an HTTP request's InferCall) and destroyed when the door is
  // done with the RPC. `method` is one the door registered
  // (Metrics::AddMethod on the pipeline's metrics).
  Call(CallPipeline* pipeline, const CallMethod* method, const CallContext* ctx,
       FinishRpc finish_rpc);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // The unary sequence, once for every unary front door: SetOp(op, the op
  // the registry finds), Open, `prepare` (on the calling thread), Admit of
  // request_bytes + output and scratch bytes with Queue::kNow (refused only
  // because the budget is busy: waits for it, Options::budget_wait, and goes
  // on from a pool thread), Run of the prepared call,
  // Finish(status, request_bytes, reply_bytes() if OK, else the error_bytes
  // given, if any). Any step's error finishes the call with it. The prepared
  // call is destroyed before Finish.
  void RunUnary(absl::string_view op, int64_t request_bytes, PrepareFn prepare,
                ReplyBytesFn reply_bytes);
  // Before RunUnary: what a failed call's reply weighs (ErrorBytesFn).
  void set_error_bytes(ErrorBytesFn error_bytes) { error_bytes_ = std::move(error_bytes); }

  // The steps one by one (ExecuteStream). The gate (CallPipeline::Gate). On
  // error, Finish with it.
  absl::Status Open();

  // The op the call names, as sent (`requested`, cut to 64 bytes for logs)
  // and as found (`def`, nullptr for an unknown op: metrics say "unknown").
  void SetOp(absl::string_view requested, const OpDef* def);

  // The bytes its door reserved for the request as it arrived
  // (CallPipeline::Reserve). Admit then makes this reservation the call's
  // ticket, growing it to the budget, so the request is never counted twice
  // and its bytes stay counted until the call is destroyed, refused or not.
  void HoldReservation(AdmissionTicket reservation) { ticket_ = std::move(reservation); }

  // Admission of `budget_bytes` (all the call holds at its peak). On refusal
  // counts it (tensorops_rejected_requests_total) and returns
  // RESOURCE_EXHAUSTED, or UNAVAILABLE during a drain; Finish with it.
  absl::Status Admit(int64_t budget_bytes, AdmissionController::Queue queue);
  // Told how AdmitOrWait ended: OK (admitted) or the refusal, and whether
  // the call waited (then it runs on the thread that freed the bytes or the
  // admission timer's, not the caller's).
  using AdmittedFn = absl::AnyInvocable<void(absl::Status, bool waited) &&>;
  // Admit, except that a call refused only because the budget is busy
  // (INFLIGHT_BYTES_EXHAUSTED: it fits the budget, not what is free of it)
  // waits for it, first come first served, up to Options::budget_wait, its
  // deadline and its timeout, and is refused (and counted) at the wait's
  // end. `admitted` runs exactly once, maybe before this returns; the Call
  // must live until then.
  void AdmitOrWait(int64_t budget_bytes, AdmissionController::Queue queue, AdmittedFn admitted);
  // The queue slot of a call admitted with Queue::kLater; refusal as Admit.
  absl::Status EnterQueue();

  // Run-or-drop of an admitted, queued call (see the file comment). `after`
  // runs on the thread that ran (or dropped) the call.
  void Run(int64_t output_bytes, KernelFn kernel, AfterFn after);

  // Ends the call, exactly once (from any step, any thread): records
  // metrics (bytes_in/bytes_out as the method's CallBytes says: message
  // sizes or tensor bytes), logs a failure (rate-limited) and the access line, then
  // finishes the RPC. The admission ticket stays held until the Call is
  // destroyed, which its owner does when gRPC is done with the RPC.
  void Finish(const absl::Status& status, int64_t bytes_in, int64_t bytes_out);

  // The call's W3C trace context (server/core/trace.h), from what its
  // caller sent, made when the Call is.
  const TraceContext& trace() const { return trace_; }
  // Whether the door sends the traceparent and Server-Timing back
  // (Options::trace_headers).
  bool trace_headers() const {
    const TraceHeaders mode = pipeline_->options_.trace_headers;
    return mode == TraceHeaders::kOn || (mode == TraceHeaders::kAuto && trace_.caller_sampled());
  }
  // The stages the call went through so far; `total` is set by Finish
  // (read it from the FinishRpc, for the reply's Server-Timing).
  const ServerTiming& server_timing() const { return timing_; }

  // A chain's kernel ran: counts its steps' ops (tensorops_chain_steps_total).
  void RecordChainSteps(absl::Span<const OpDef* const> steps) {
    pipeline_->metrics_->RecordChainSteps(steps);
  }

  // The admission ticket, after Finish, for a door whose reply outlives the
  // Call (HTTP: the connection writes the answer after the call is gone),
  // so that the reply's bytes stay counted, and the drain waits, until it
  // has left.
  AdmissionTicket TakeTicket() { return std::move(ticket_); }

 private:
  // The run-or-drop step proper, on the thread that runs the call.
  void RunNow();
  // Why a queued call must not run at `now` (counted as dropped), or OK.
  absl::Status CheckDrop(absl::Time now);
  // Admit without counting a refusal; *limit says which.
  absl::Status TryAdmit(int64_t budget_bytes, AdmissionController::Queue queue,
                        AdmissionController::Limit* limit);
  // RunUnary after its admission: Run of the prepared call, then EndUnary.
  void RunAdmitted();
  // AdmitOrWait refused with `refusal` because the budget is busy: waits
  // for `bytes` of it, then `admitted` (waited = true).
  void WaitForBudget(int64_t bytes, AdmissionController::Queue queue, absl::Status refusal,
                     AdmittedFn admitted);
  // RunUnary's end: drops the prepared call, then Finish.
  void EndUnary(const absl::Status& status);
  // Finish's span for Options::spans.
  void ExportSpan(const absl::Status& status, int64_t bytes_in, int64_t bytes_out);

  CallPipeline* const pipeline_;
  const CallMethod* const method_;
  const CallContext* const ctx_;
  // The prepared call's timeout() (RunUnary): a queued call is dropped past
  // start_ + timeout_ too.
  absl::Duration timeout_ = absl::InfiniteDuration();
  FinishRpc finish_rpc_;
  const absl::Time start_;
  // After ctx_: made from what the caller sent.
  TraceContext trace_;  // set at construction (the sampler may set a new trace's flags)
  ServerTiming timing_;
  bool record_span_ = false;  // Options::spans and the sampler's pick
  absl::Time kernel_start_;   // when timing_.kernel is set: for its span
  int op_index_;
  std::string op_text_ = "none";
  AdmissionTicket ticket_;
  absl::Time queued_at_;
  KernelFn kernel_;
  AfterFn after_;
  // RunUnary's state.
  std::unique_ptr<PreparedCall> prepared_;
  int64_t request_bytes_ = 0;
  ReplyBytesFn reply_bytes_;
  ErrorBytesFn error_bytes_;
  bool finished_ = false;
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_CALL_H_
