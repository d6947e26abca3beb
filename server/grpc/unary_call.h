// A unary front door's RPC (Execute, ModelInfer) over gRPC's callback API
// without a reactor of its own: the call's request and reply (raw
// grpc::ByteBuffers: server/grpc/raw_unary.h reads and writes their bytes),
// its arena messages and its Call live in one holder that gRPC's
// MessageAllocator hands out, and the RPC is finished through gRPC's
// DefaultReactor.
//
// Why not a ServerUnaryReactor subclass that deletes itself (and the Call,
// and with it the admission ticket) in OnDone: gRPC runs OnDone inline only
// for its own reactors (ServerReactor::InternalInlineable(), not API); a
// user reactor's OnDone is handed to gRPC's executor threads, one thread
// wake-up per call, which cost a small call about as much server CPU as a
// whole bare echo call (docs/benchmarks-history.md, "Issue 30 session").
// DefaultReactor's reactions run inline.
//
// Why the Call's end stays where it was: gRPC calls MessageHolder::Release
// "when it is done" with the request and the response
// (grpcpp/support/message_allocator.h), i.e. once the RPC is complete (the
// status and the reply have been handed to the transport) and after OnDone.
// Release destroys the Call, so the admission ticket (--max_inflight_bytes,
// the drain's "nothing in flight") goes back exactly once, at the same point
// as from an OnDone, and never before the reply has left: gRPC needs the
// response message until then, so no version can release the holder earlier.
// Only public API is used: MessageAllocator, GetRpcAllocatorState() and
// DefaultReactor(), which supports a Finish from the handler or later from
// any thread (server_context.h), as Call::Run's pool path does.
//
// The parsed messages go on one protobuf Arena: without it every nested
// message is its own allocation (an ExecuteRequest of three tensors is eight,
// each freed again on its own). On the arena they are bump allocations in a
// block inside the holder, and the whole call (its buffers, messages and
// Call) goes with one delete. Big tensor payloads are unaffected: a string
// field's buffer is still the string's own (the arena only owns the
// std::string object), and a big output is a slice of its own
// (raw_unary.h).
//
// Thread-safety: AllocateMessages and Start may be called from any thread;
// each holder belongs to one call.
//
// Example (the method registered raw, WithRawCallbackMethod_Execute):
//   UnaryCallAllocator<v1::ExecuteRequest, v1::ExecuteResponse> allocator;
//   static_cast<grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>*>(
//       GetHandler(0))->SetMessageAllocator(&allocator);  // before BuildAndStart
//   // in the handler:
//   return decltype(allocator)::Start(pipeline, methods.execute, ctx, &OpOf, prepare);
#ifndef TENSOROPS_SERVER_GRPC_UNARY_CALL_H_
#define TENSOROPS_SERVER_GRPC_UNARY_CALL_H_

#include <google/protobuf/arena.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/message_allocator.h>
#include <grpcpp/support/server_callback.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/call.h"
#include "server/core/metrics.h"
#include "server/grpc/grpc_call_context.h"
#include "server/grpc/raw_unary.h"
#include "wire/status.h"

namespace tensorops {

template <typename Request, typename Response>
class UnaryCallAllocator final : public grpc::MessageAllocator<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  grpc::MessageHolder<grpc::ByteBuffer, grpc::ByteBuffer>* AllocateMessages() override {
    return new Holder();
  }

  // Decodes and validates a parsed request into the call to run; `response`
  // (the arena's message) is for replies below kSliceReplyMinBytes, `reply`
  // is what goes out (PreparedCall::Run fills it).
  using PrepareFn = absl::FunctionRef<absl::StatusOr<std::unique_ptr<PreparedCall>>(
      const Request& request, Response* response, grpc::ByteBuffer* reply)>;

  // The handler's whole body: parses the request, then Call::RunUnary with
  // the op `op_of` names (empty when the body did not parse: the call then
  // fails with the parse error after the gate) and `prepare`, finished
  // through ctx->DefaultReactor(), which it returns. The method must have
  // this allocator registered; otherwise the RPC fails with INTERNAL.
  static grpc::ServerUnaryReactor* Start(CallPipeline* pipeline, const CallMethod* method,
                                         grpc::CallbackServerContext* ctx,
                                         absl::string_view (*op_of)(const Request&),
                                         PrepareFn prepare) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto* holder = dynamic_cast<Holder*>(ctx->GetRpcAllocatorState());
    if (holder == nullptr) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                   "server bug: the method's message allocator is not registered"));
      return reactor;
    }
    grpc::ByteBuffer* body = holder->request();
    const auto request_bytes = static_cast<int64_t>(body->Length());
    const absl::Status parsed = ParseRequest(body, holder->message_);
    const CallContext* call_context = &holder->call_context_.emplace(ctx);
    Call& call = holder->call_.emplace(pipeline, method, call_context,
                                       [reactor, ctx, holder](const absl::Status& s) {
                                         // Initial metadata leaves with a unary Finish.
                                         AddTraceparent(*holder->call_, ctx, s.ok());
                                         AddServerTiming(*holder->call_, ctx);
                                         if (!s.ok()) holder->response()->Clear();
                                         reactor->Finish(ToGrpcStatus(s, ctx));
                                       });
    grpc::ByteBuffer* reply = holder->response();
    call.RunUnary(
        parsed.ok() ? op_of(*holder->message_) : absl::string_view(), request_bytes,
        [&]() -> absl::StatusOr<std::unique_ptr<PreparedCall>> {
          if (!parsed.ok()) return parsed;
          return prepare(*holder->message_, holder->reply_message_, reply);
        },
        [reply] { return static_cast<int64_t>(reply->Length()); });
    return reactor;
  }

 private:
  // Room for a small call's messages without a block from the heap.
  static constexpr size_t kInitialBlockBytes = 2048;

  class Holder final : public grpc::MessageHolder<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    Holder() : arena_(Options(initial_block_)) {
      this->set_request(&request_);
      this->set_response(&response_);
      message_ = google::protobuf::Arena::CreateMessage<Request>(&arena_);
      reply_message_ = google::protobuf::Arena::CreateMessage<Response>(&arena_);
    }
    // gRPC calls Release once the call is done with both buffers: the Call
    // goes first (its ticket back), then the arena with the messages.
    void Release() override { delete this; }

   private:
    friend class UnaryCallAllocator;

    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = kInitialBlockBytes;
      return options;
    }
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
    alignas(std::max_align_t) char initial_block_[kInitialBlockBytes];
    google::protobuf::Arena arena_;
    Request* message_ = nullptr;         // on arena_
    Response* reply_message_ = nullptr;  // on arena_
    // Set by Start. Declared after the arena: destroyed before it; the
    // call's context before the call: destroyed after it.
    std::optional<GrpcCallContext> call_context_;
    std::optional<Call> call_;
  };
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_UNARY_CALL_H_
