// A gRPC MessageAllocator that puts a unary call's request and response on
// one protobuf Arena.
//
// Without it the callback API news both messages and every nested message
// (an ExecuteRequest of three tensors is eight allocations, each freed again
// on its own). On the arena they are bump allocations in a block that lives
// inside the holder, and the whole call's messages go with one delete.
// Measured with callgrind on 2000 lone 64-byte Execute calls: see
// BENCHMARKS.md, "Service".
//
// Big tensor payloads are unaffected: a string field's buffer is still the
// string's own (the arena only owns the std::string object), so raw_data
// keeps its size and its huge-page advice.
//
// Thread-safety: AllocateMessages may be called from any thread; each holder
// belongs to one call.
//
// Example:
//   ArenaMessageAllocator<v1::ExecuteRequest, v1::ExecuteResponse> allocator;
//   service.SetMessageAllocatorFor_Execute(&allocator);  // before BuildAndStart
#ifndef TENSOROPS_SERVER_GRPC_ARENA_ALLOCATOR_H_
#define TENSOROPS_SERVER_GRPC_ARENA_ALLOCATOR_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <cstddef>

namespace tensorops {

template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  // Room for a small call's messages without a block from the heap.
  static constexpr size_t kInitialBlockBytes = 2048;

  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(initial_block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC calls Release once the call is done with both messages.
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = kInitialBlockBytes;
      return options;
    }
    alignas(std::max_align_t) char initial_block_[kInitialBlockBytes];
    google::protobuf::Arena arena_;
  };
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_ARENA_ALLOCATOR_H_
