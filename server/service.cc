#include "server/service.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/execution.h"
#include "server/logging.h"
#include "server/status_util.h"

namespace tensorops {
namespace {

double SecondsSince(absl::Time t) { return absl::ToDoubleSeconds(absl::Now() - t); }

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

// Execute's reactor. It holds the call's admission (budget bytes and the
// in-flight count) until OnDone, when gRPC has handed the reply to the
// transport: the budget covers the response for as long as it exists, and
// the drain's "nothing in flight" means every admitted reply has left, so the
// server may then close its connections without cutting one off.
class ExecuteReactor final : public grpc::ServerUnaryReactor {
 public:
  ExecuteReactor(AdmissionController* admission, Metrics* metrics)
      : admission_(admission), metrics_(metrics) {}

  // The call was admitted with `budget_bytes`; OnDone gives them back.
  void HoldAdmission(int64_t budget_bytes) {
    budget_bytes_ = budget_bytes;
    admitted_ = true;
  }

  void OnDone() override {
    if (admitted_) {
      admission_->Finish(budget_bytes_);
      metrics_->AddInflightRequests(-1);
      metrics_->AddInflightBytes(-budget_bytes_);
    }
    delete this;
  }

 private:
  AdmissionController* const admission_;
  Metrics* const metrics_;
  bool admitted_ = false;
  int64_t budget_bytes_ = 0;
};

}  // namespace

TensorOpsService::TensorOpsService(const OpRegistry* registry, ThreadPool* pool,
                                   AdmissionController* admission, Metrics* metrics,
                                   Options options)
    : registry_(registry),
      pool_(pool),
      admission_(admission),
      metrics_(metrics),
      options_(options),
      expected_authorization_(options.auth_token.empty()
                                  ? std::string()
                                  : absl::StrCat("Bearer ", options.auth_token)) {}

grpc::Status TensorOpsService::CheckAuth(const grpc::CallbackServerContext* ctx) const {
  if (expected_authorization_.empty()) return grpc::Status::OK;
  const std::string& expected = expected_authorization_;
  const auto& metadata = ctx->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing \"authorization: Bearer <token>\" metadata");
  }
  if (!ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()), expected)) {
    // Never echo what was sent or expected.
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid bearer token");
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* TensorOpsService::Execute(grpc::CallbackServerContext* ctx,
                                                    const v1::ExecuteRequest* request,
                                                    v1::ExecuteResponse* response) {
  const absl::Time start = absl::Now();
  ExecuteReactor* reactor = new ExecuteReactor(admission_, metrics_);
  // Aliases ("Roll-7") count under their op's canonical name.
  const OpDef* def = registry_->Find(request->op());
  const int op_index = metrics_->OpIndex(def != nullptr ? def->spec.name : "unknown");
  const int64_t request_bytes = static_cast<int64_t>(request->ByteSizeLong());
  // Every exit goes through here: metrics, logs, Finish.
  auto finish = [this, reactor, start, op_index, request, request_bytes,
                 response](const grpc::Status& status) {
    const double seconds = SecondsSince(start);
    const int64_t response_bytes =
        status.ok() ? static_cast<int64_t>(response->ByteSizeLong()) : 0;
    metrics_->RecordExecute(op_index, status.error_code(), seconds, request_bytes,
                            response_bytes);
    if (!status.ok()) LogRequestError(status.error_code(), request->op().substr(0, 64), status.error_message());
    if (options_.access_log) {
      Log(LogLevel::kInfo,
          absl::StrCat("access method=Execute op=", request->op().substr(0, 64),
                       " code=", StatusCodeName(status.error_code()), " request_bytes=", request_bytes,
                       " response_bytes=", response_bytes,
                       " us=", static_cast<int64_t>(seconds * 1e6)));
    }
    reactor->Finish(status);
  };

  if (grpc::Status auth = CheckAuth(ctx); !auth.ok()) {
    finish(auth);
    return reactor;
  }
  if (draining_.load()) {
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    return reactor;
  }
  absl::StatusOr<std::unique_ptr<PreparedExecution>> prepared =
      PreparedExecution::Make(*registry_, *request, options_.limits);
  if (!prepared.ok()) {
    finish(ToGrpcStatus(prepared.status()));
    return reactor;
  }
  const int64_t budget_bytes = request_bytes + (*prepared)->output_bytes();
  AdmissionController::Limit limit;
  absl::Status admitted = admission_->Admit(budget_bytes, &limit);
  if (!admitted.ok()) {
    // kNone: admission is closed (the drain), not a limit.
    if (limit != AdmissionController::Limit::kNone) {
      metrics_->RecordRejected(limit == AdmissionController::Limit::kQueue
                                   ? Metrics::Limit::kQueue
                                   : Metrics::Limit::kInflightBytes);
    }
    finish(ToGrpcStatus(admitted));
    return reactor;
  }
  reactor->HoldAdmission(budget_bytes);
  metrics_->AddInflightRequests(1);
  metrics_->AddInflightBytes(budget_bytes);
  metrics_->SetQueueDepth(admission_->queued());

  // std::function needs a copyable callable: share the prepared execution.
  std::shared_ptr<PreparedExecution> exec = std::move(*prepared);
  auto task = [this, ctx, exec, response, finish, op_index, start] {
    admission_->LeaveQueue();
    metrics_->SetQueueDepth(admission_->queued());
    const double queued_seconds = SecondsSince(start);
    grpc::Status status;
    if (aborting_.load()) {
      metrics_->RecordDropped(op_index, Metrics::DropReason::kShutdown);
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "server is shutting down; the request was not run");
    } else if (ctx->deadline() < std::chrono::system_clock::now()) {
      // Checked before IsCancelled: gRPC also cancels a call whose deadline passed.
      metrics_->RecordDropped(op_index, Metrics::DropReason::kDeadline);
      status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "deadline passed while the request was queued; it was not run");
    } else if (ctx->IsCancelled()) {
      metrics_->RecordDropped(op_index, Metrics::DropReason::kCancelled);
      status = grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled before it ran");
    } else {
      const absl::Time kernel_start = absl::Now();
      exec->Run(response, pool_, options_.min_parallel_bytes);
      metrics_->RecordKernel(op_index, queued_seconds, SecondsSince(kernel_start));
    }
    finish(status);  // the reactor gives the admission back in OnDone
  };
  // Opt-in (--inline_max_bytes, 0 by default): small outputs run on this
  // gRPC thread, saving the hand-off to the pool (BENCHMARKS.md, fix 1) at
  // the price of the rule that gRPC's threads never run kernels.
  if (exec->output_bytes() < options_.inline_max_bytes) {
    task();
  } else {
    pool_->Schedule(std::move(task));
  }
  return reactor;
}

grpc::ServerUnaryReactor* TensorOpsService::ListOps(grpc::CallbackServerContext* ctx,
                                                    const v1::ListOpsRequest*,
                                                    v1::ListOpsResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  grpc::Status status = CheckAuth(ctx);
  if (!status.ok()) {
    LogRequestError(status.error_code(), "none", status.error_message());
  } else if (draining_.load()) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
  } else {
    DescribeOps(*registry_, response);
  }
  metrics_->RecordListOps(status.error_code(), SecondsSince(start));
  reactor->Finish(status);
  return reactor;
}

}  // namespace tensorops
