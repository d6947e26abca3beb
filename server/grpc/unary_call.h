// A unary front door's RPC over gRPC's callback API without a reactor of
// its own: the call's messages and its Call live in one holder that gRPC's
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
// The messages go on one protobuf Arena: without it the callback API news
// both messages and every nested message (an ExecuteRequest of three tensors
// is eight allocations, each freed again on its own). On the arena they are
// bump allocations in a block inside the holder, and the whole call (its
// messages and its Call) goes with one delete. Big tensor payloads are
// unaffected: a string field's buffer is still the string's own (the arena
// only owns the std::string object), so raw_data keeps its size and its
// huge-page advice.
//
// Thread-safety: AllocateMessages and Start may be called from any thread;
// each holder belongs to one call.
//
// Example:
//   UnaryCallAllocator<v1::ExecuteRequest, v1::ExecuteResponse> allocator;
//   service.SetMessageAllocatorFor_Execute(&allocator);  // before BuildAndStart
//   // in the handler:
//   return decltype(allocator)::Start(pipeline, methods.execute, ctx, request->op(),
//                                     request->ByteSizeLong(), prepare, reply_bytes);
#ifndef TENSOROPS_SERVER_GRPC_UNARY_CALL_H_
#define TENSOROPS_SERVER_GRPC_UNARY_CALL_H_

#include <google/protobuf/arena.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/message_allocator.h>
#include <grpcpp/support/server_callback.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/string_view.h"
#include "server/core/call.h"
#include "server/core/metrics.h"
#include "server/grpc/grpc_call_context.h"
#include "wire/status.h"

namespace tensorops {

template <typename Request, typename Response>
class UnaryCallAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

  // The handler's whole body: Call::RunUnary of the RPC `ctx` belongs to,
  // finished through ctx->DefaultReactor(), which it returns. The method
  // must have this allocator registered (SetMessageAllocatorFor_<Method>);
  // otherwise the RPC fails with INTERNAL.
  static grpc::ServerUnaryReactor* Start(CallPipeline* pipeline, const CallMethod* method,
                                         grpc::CallbackServerContext* ctx, absl::string_view op,
                                         int64_t request_bytes, Call::PrepareFn prepare,
                                         Call::ReplyBytesFn reply_bytes) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto* holder = dynamic_cast<Holder*>(ctx->GetRpcAllocatorState());
    if (holder == nullptr) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                   "server bug: the method's message allocator is not registered"));
      return reactor;
    }
    const CallContext* call_context = &holder->call_context_.emplace(ctx);
    Call& call = holder->call_.emplace(pipeline, method, call_context,
                                       [reactor, ctx, holder](const absl::Status& s) {
                                         // Initial metadata leaves with a unary Finish.
                                         AddTraceparent(*holder->call_, ctx, s.ok());
                                         AddServerTiming(*holder->call_, ctx);
                                         reactor->Finish(ToGrpcStatus(s, ctx));
                                       });
    // The holder, and the Call in it, outlive the handler: gRPC releases it
    // only after the handler has returned and the RPC is complete.
    call.RunUnary(op, request_bytes, prepare, std::move(reply_bytes));
    return reactor;
  }

 private:
  // Room for a small call's messages without a block from the heap.
  static constexpr size_t kInitialBlockBytes = 2048;

  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(initial_block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC calls Release once the call is done with both messages: the Call
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
    alignas(std::max_align_t) char initial_block_[kInitialBlockBytes];
    google::protobuf::Arena arena_;
    // Set by Start. Declared after the arena: destroyed before it; the
    // call's context before the call: destroyed after it.
    std::optional<GrpcCallContext> call_context_;
    std::optional<Call> call_;
  };
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_UNARY_CALL_H_
