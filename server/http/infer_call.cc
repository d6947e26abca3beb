#include "server/http/infer_call.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/status_macros.h"
#include "kernels/tensor.h"
#include "server/core/trace.h"
#include "server/http/http_call_context.h"
#include "server/http/json_binding.h"
#include "server/http/oip_json.h"
#include "server/oip/oip_codec.h"

namespace tensorops {
namespace {

// What an infer's answer writes from: its JSON text and binary outputs,
// kept until the connection has written them (HttpBody::owner).
struct InferAnswer {
  JsonText json;
  std::vector<Tensor> binary;
};

// One infer, from its request to its answer. Owns itself: deleted in
// Answer, on the connection's loop, once the answer is handed to the
// connection, with the admission ticket (shrunk to the answer's bytes),
// which the connection gives back once the answer is written, as a gRPC
// reactor's OnDone does.
class InferCall {
 public:
  InferCall(CallPipeline* pipeline, const CallMethod* method, const OipService* oip,
            HttpRequest req, HttpExecutor loop, Reply reply)
      : pipeline_(pipeline),
        method_(method),
        oip_(oip),
        req_(std::move(req)),
        loop_(std::move(loop)),
        reply_(std::move(reply)) {}

  void Start(const std::string& model, const std::string& version);

 private:
  // Runs the kernel into the response and encodes it, on the thread that
  // runs the call.
  class Prepared final : public PreparedCall {
   public:
    Prepared(InferCall* call, std::unique_ptr<PreparedInfer> p)
        : call_(call), prepared_(std::move(p)) {}
    int64_t output_bytes() const override { return prepared_->output_bytes(); }
    int64_t scratch_bytes() const override { return prepared_->scratch_bytes(); }
    absl::Span<const OpDef* const> chain() const override { return prepared_->chain(); }
    absl::Duration timeout() const override { return prepared_->timeout(); }
    absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
      RETURN_IF_ERROR(prepared_->Run(&call_->response_, pool, min_parallel_bytes));
      return call_->response_.Encode(*call_->parsed_, &call_->json_, &call_->binary_);
    }

   private:
    InferCall* const call_;
    std::unique_ptr<PreparedInfer> prepared_;
  };

  // A Content-Encoding other than identity: answered without a Call (not
  // counted), after the gate as before. False when there is none.
  bool RefusedEncoding();
  absl::StatusOr<std::unique_ptr<PreparedCall>> Prepare(const std::string& model,
                                                        const std::string& version);
  // The call's own traceparent and its stages (Server-Timing), when the
  // pipeline sends them (--trace_headers).
  void AddTraceHeaders(HttpResponse* r) const {
    if (!call_->trace_headers()) return;
    r->headers.emplace_back("traceparent", std::string(call_->trace().traceparent()));
    r->headers.emplace_back("Server-Timing", RenderServerTiming(call_->server_timing()));
  }
  // Shared-memory regions belong to the caller's Authorization value when
  // tokens are on (as on gRPC, so both doors see the same regions).
  std::string Owner() const { return oip_->ShmOwner(req_.Header("Authorization")); }
  void Answer();
  HttpResponse Success();

  CallPipeline* const pipeline_;
  const CallMethod* const method_;
  const OipService* const oip_;
  HttpRequest req_;
  HttpExecutor loop_;  // the connection's loop
  Reply reply_;
  // Inference-Header-Content-Length: its value, or why it is not one.
  std::optional<int64_t> header_length_;
  absl::Status header_status_;
  std::unique_ptr<JsonInferRequest> parsed_;
  JsonInferResponse response_;
  JsonText json_;
  std::vector<Tensor> binary_;
  absl::Status status_;
  std::optional<HttpResponse> error_reply_;      // a failure's answer, made when the call ends
  std::optional<HttpCallContext> call_context_;  // declared before call_: outlives it
  std::unique_ptr<Call> call_;
};

void InferCall::Start(const std::string& model, const std::string& version) {
  if (std::optional<std::string> h = req_.Header("Inference-Header-Content-Length")) {
    int64_t l = 0;
    if (!absl::SimpleAtoi(*h, &l)) {
      header_status_ =
          absl::InvalidArgumentError("Inference-Header-Content-Length must be a decimal integer");
    }
    header_length_ = l;
  }
  if (RefusedEncoding()) {
    delete this;
    return;
  }
  call_context_.emplace(req_.Header("Authorization"), &req_);
  call_ =
      std::make_unique<Call>(pipeline_, method_, &*call_context_, [this](const absl::Status& s) {
        status_ = s;
        // Always through the loop's queue: this may run
        // inside RunUnary, which still uses the call.
        loop_([this] { Answer(); });
      });
  // The body was counted as it arrived: its reservation becomes the
  // call's admission ticket, grown to the call's whole budget.
  call_->HoldReservation(req_.body.TakeReservation());
  // A failure's answer is made here, when the call ends, so that its size
  // is the access line's response_bytes; Answer sends it.
  call_->set_error_bytes([this](const absl::Status& s) {
    error_reply_ = ErrorResponse(s);
    return static_cast<int64_t>(error_reply_->body.size());
  });
  call_->RunUnary(
      model, static_cast<int64_t>(req_.body.view().size()),
      [&]() { return Prepare(model, version); },
      [this] {
        int64_t n = static_cast<int64_t>(json_.size());
        for (const Tensor& b : binary_) n += b.num_bytes();
        return n;
      });
}

bool InferCall::RefusedEncoding() {
  std::optional<std::string> e = req_.Header("Content-Encoding");
  if (!e.has_value() || *e == "identity") return false;
  absl::Status gate = Gate(*pipeline_, req_.Header("Authorization"));
  reply_(!gate.ok()
             ? ErrorResponse(gate)
             : JsonResponse(415, ErrorJson(absl::StrCat("Content-Encoding '", *e,
                                                        "' is not supported; send identity"))));
  return true;
}

absl::StatusOr<std::unique_ptr<PreparedCall>> InferCall::Prepare(const std::string& model,
                                                                 const std::string& version) {
  // The path's model first: an unknown one is 404 whatever the body.
  RETURN_IF_ERROR(FindModel(pipeline_->registry(), model, version).status());
  RETURN_IF_ERROR(header_status_);
  ASSIGN_OR_RETURN(parsed_, JsonInferRequest::Parse(req_.body.view(), header_length_, model,
                                                    version, pipeline_->limits()));
  absl::StatusOr<std::unique_ptr<PreparedInfer>> prepared = PreparedInfer::Make(
      pipeline_->registry(), parsed_->request(), pipeline_->limits(), oip_->shm(), Owner());
  if (!prepared.ok()) {
    return MapErrorFieldPath(prepared.status(),
                             [this](absl::string_view path) { return parsed_->FieldPath(path); });
  }
  return std::make_unique<Prepared>(this, *std::move(prepared));
}

void InferCall::Answer() {
  if (!status_.ok()) {
    HttpResponse r = error_reply_.has_value() ? *std::move(error_reply_) : ErrorResponse(status_);
    AddTraceHeaders(&r);
    reply_(std::move(r));
  } else {
    reply_(Success());
  }
  delete this;  // ~Call gives an error's admission ticket back
}

HttpResponse InferCall::Success() {
  HttpResponse r;
  if (binary_.empty()) {
    r.headers.emplace_back("Content-Type", "application/json");
  } else {
    r.headers.emplace_back("Content-Type", "application/octet-stream");
    r.headers.emplace_back("Inference-Header-Content-Length", absl::StrCat(json_.size()));
  }
  AddTraceHeaders(&r);
  auto answer = std::make_shared<InferAnswer>();
  answer->json = std::move(json_);
  answer->binary = std::move(binary_);
  r.body.parts.push_back(answer->json.view());
  for (const Tensor& t : answer->binary) {
    r.body.parts.emplace_back(t.data_as<char>(), static_cast<size_t>(t.num_bytes()));
  }
  r.body.owner = std::move(answer);
  // The request's bytes go with this InferCall; the answer's stay
  // counted until the connection has written them.
  r.ticket = call_->TakeTicket();
  AdmissionController::Limit unused;
  r.ticket.Resize(static_cast<int64_t>(r.body.size()), &unused).IgnoreError();
  return r;
}

}  // namespace

const CallMethod* RegisterInferMethod(Metrics* metrics) {
  CallMethodSpec spec;
  spec.name = "REST";
  spec.bytes = CallBytes::kMessageSizes;  // body and answer sizes
  // The span per OpenTelemetry's HTTP server conventions: named by method
  // and route, the answer's status under http.response.status_code, failed
  // on a 5xx (a caller's 4xx is not the server's failure).
  spec.span.name = "POST /v2/models/{model}/infer";
  spec.span.attributes = {{"http.request.method", "POST"},
                          {"http.route", "/v2/models/{model}/infer"}};
  spec.span.code_attribute = "http.response.status_code";
  spec.span.code_value = [](absl::StatusCode code) { return HttpStatusOf(absl::Status(code, "")); };
  spec.span.failed = [](absl::StatusCode code) {
    return HttpStatusOf(absl::Status(code, "")) >= 500;
  };
  return metrics->AddMethod(spec);
}

void StartInferCall(CallPipeline* pipeline, const CallMethod* method, const OipService* oip,
                    HttpRequest request, HttpExecutor loop, Reply reply, const std::string& model,
                    const std::string& version) {
  (new InferCall(pipeline, method, oip, std::move(request), std::move(loop), std::move(reply)))
      ->Start(model, version);
}

}  // namespace tensorops
