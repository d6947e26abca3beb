// ExecuteStream: the RPC half of a streamed call (server/stream_execution.h
// holds the rest).
//
// One call moves through its phases strictly one after another, so at most
// one of its callbacks runs at any time and the reactor needs no lock:
//   upload    gRPC threads: header -> validation and admission (bytes only);
//             each chunk -> copied into its input; the client's half-close
//             -> lengths and CRCs checked, then a queue slot;
//   kernel    one pool task: dropped if the deadline passed or the call was
//             cancelled, else the op runs (split across the pool when large);
//   download  gRPC threads: the output header, then one chunk per write,
//             each written when the previous one left (flow control bounds
//             what is buffered to one chunk).
// Every failure (a bad message, a broken read or write when the client
// cancels or disconnects) ends the call at once through Fail(), which frees
// the tensors and gives the bytes back to admission control.
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/logging.h"
#include "server/service.h"
#include "server/status_util.h"
#include "server/stream_execution.h"

namespace tensorops {

class ExecuteStreamReactor final
    : public grpc::ServerBidiReactor<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse> {
 public:
  ExecuteStreamReactor(TensorOpsService* service, grpc::CallbackServerContext* ctx)
      : service_(service), ctx_(ctx), start_(absl::Now()) {
    op_index_ = service_->metrics_->unknown_op_index();
    if (grpc::Status auth = service_->CheckAuth(ctx_); !auth.ok()) {
      Fail(auth);
      return;
    }
    if (service_->draining_.load()) {
      Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndOfUpload();
      return;
    }
    absl::Status status = exec_ == nullptr ? OnHeader() : OnChunk();
    if (!status.ok()) {
      Fail(ToGrpcStatus(status));
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Fail(grpc::Status(grpc::StatusCode::CANCELLED,
                        "the client went away while the output was being sent"));
      return;
    }
    response_.Clear();
    if (exec_->NextChunk(response_.mutable_chunk())) {
      sent_bytes_ += static_cast<int64_t>(response_.chunk().data().size());
      StartWrite(&response_);
      return;
    }
    Finish(grpc::Status::OK);
  }

  // The admission is held until here, when gRPC has handed the final status
  // to the transport, so the drain's "nothing in flight" means every admitted
  // call's last byte has left (see ExecuteReactor in service.cc).
  void OnDone() override {
    if (admitted_) {
      service_->admission_->Finish(budget_bytes_);
      service_->metrics_->AddInflightRequests(-1);
      service_->metrics_->AddInflightBytes(-budget_bytes_);
    }
    delete this;
  }

 private:
  absl::Status OnHeader() {
    if (!request_.has_header()) {
      return absl::InvalidArgumentError(
          "the first ExecuteStream message must be a header (op, attrs, input dtypes, shapes "
          "and CRC-32s); got a chunk");
    }
    op_text_ = request_.header().op().substr(0, 64);
    absl::StatusOr<std::unique_ptr<StreamedExecution>> exec = StreamedExecution::Begin(
        *service_->registry_, request_.header(), service_->options_.limits);
    if (!exec.ok()) return exec.status();
    op_index_ = service_->metrics_->OpIndex((*exec)->op_name());
    AdmissionController::Limit limit;
    absl::Status admitted = service_->admission_->AdmitStream((*exec)->budget_bytes(), &limit);
    if (!admitted.ok()) {
      RecordRejected(limit);
      return admitted;
    }
    exec_ = *std::move(exec);
    admitted_ = true;
    budget_bytes_ = exec_->budget_bytes();
    service_->metrics_->AddInflightRequests(1);
    service_->metrics_->AddInflightBytes(budget_bytes_);
    return absl::OkStatus();
  }

  absl::Status OnChunk() {
    if (request_.has_header()) {
      return absl::InvalidArgumentError("a second header in one ExecuteStream call");
    }
    if (!request_.has_chunk()) {
      return absl::InvalidArgumentError("an ExecuteStream message with neither header nor chunk");
    }
    return exec_->AddChunk(request_.chunk());
  }

  // The read side ended: the client closed it (upload complete, or short),
  // or the call broke (cancelled, deadline, disconnect).
  void EndOfUpload() {
    if (ctx_->IsCancelled()) {
      Fail(grpc::Status(grpc::StatusCode::CANCELLED,
                        absl::StrCat("the call was cancelled (client cancel, deadline or "
                                     "disconnect) after ",
                                     exec_ != nullptr ? exec_->received_bytes() : 0,
                                     " input bytes")));
      return;
    }
    if (exec_ == nullptr) {
      Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the ExecuteStream call ended before its header"));
      return;
    }
    if (absl::Status s = exec_->EndOfInput(); !s.ok()) {
      Fail(ToGrpcStatus(s));
      return;
    }
    AdmissionController::Limit limit;
    if (absl::Status s = service_->admission_->EnterQueue(&limit); !s.ok()) {
      RecordRejected(limit);
      Fail(ToGrpcStatus(s));
      return;
    }
    queued_at_ = absl::Now();
    service_->metrics_->SetQueueDepth(service_->admission_->queued());
    service_->pool_->Schedule([this] { RunKernel(); });
  }

  // On a pool thread.
  void RunKernel() {
    service_->admission_->LeaveQueue();
    service_->metrics_->SetQueueDepth(service_->admission_->queued());
    Metrics* metrics = service_->metrics_;
    if (service_->aborting_.load()) {
      metrics->RecordDropped(op_index_, Metrics::DropReason::kShutdown);
      Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "server is shutting down; the request was not run"));
      return;
    }
    if (ctx_->deadline() < std::chrono::system_clock::now()) {
      metrics->RecordDropped(op_index_, Metrics::DropReason::kDeadline);
      Fail(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "deadline passed while the request was queued; it was not run"));
      return;
    }
    if (ctx_->IsCancelled()) {
      metrics->RecordDropped(op_index_, Metrics::DropReason::kCancelled);
      Fail(grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled before it ran"));
      return;
    }
    const absl::Time kernel_start = absl::Now();
    absl::Status status = exec_->Run(service_->pool_, service_->options_.min_parallel_bytes);
    metrics->RecordKernel(op_index_, absl::ToDoubleSeconds(kernel_start - queued_at_),
                          absl::ToDoubleSeconds(absl::Now() - kernel_start));
    if (!status.ok()) {
      Fail(ToGrpcStatus(status));
      return;
    }
    exec_->FillOutputHeader(response_.mutable_header());
    StartWrite(&response_);
  }

  void RecordRejected(AdmissionController::Limit limit) {
    if (limit == AdmissionController::Limit::kNone) return;  // closed for the drain
    service_->metrics_->RecordRejected(limit == AdmissionController::Limit::kQueue
                                           ? Metrics::Limit::kQueue
                                           : Metrics::Limit::kInflightBytes);
  }

  void Fail(const grpc::Status& status) {
    LogRequestError(status.error_code(), op_text_, status.error_message());
    Finish(status);
  }

  // Every call ends here exactly once: metrics, access log, memory (the
  // admission is given back in OnDone).
  void Finish(const grpc::Status& status) {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
    const int64_t received = exec_ != nullptr ? exec_->received_bytes() : 0;
    service_->metrics_->RecordExecuteStream(op_index_, status.error_code(), seconds, received,
                                            sent_bytes_);
    if (service_->options_.access_log) {
      Log(LogLevel::kInfo,
          absl::StrCat("access method=ExecuteStream op=", op_text_,
                       " code=", StatusCodeName(status.error_code()),
                       " received_bytes=", received, " sent_bytes=", sent_bytes_,
                       " us=", static_cast<int64_t>(seconds * 1e6)));
    }
    // Free the tensors now, not when gRPC gets round to OnDone.
    exec_.reset();
    grpc::ServerBidiReactor<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>::Finish(status);
  }

  TensorOpsService* const service_;
  grpc::CallbackServerContext* const ctx_;
  const absl::Time start_;
  absl::Time queued_at_;
  int op_index_ = 0;
  std::string op_text_ = "none";
  v1::ExecuteStreamRequest request_;
  v1::ExecuteStreamResponse response_;
  std::unique_ptr<StreamedExecution> exec_;
  bool admitted_ = false;  // holds budget_bytes_ of admission's budget
  int64_t budget_bytes_ = 0;
  int64_t sent_bytes_ = 0;
};

grpc::ServerBidiReactor<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>*
TensorOpsService::ExecuteStream(grpc::CallbackServerContext* ctx) {
  return new ExecuteStreamReactor(this, ctx);
}

}  // namespace tensorops
