// ExecuteStream's front door: the RPC half of a streamed call
// (server/v1/stream_execution.h holds the op call, server/core/call.h the lifecycle).
//
// The method is served raw (grpc::ByteBuffer messages; TensorOpsService
// registers it so): the reactor reads and writes chunks in place.
//
// Thread-safety: one reactor per call. A non-flowing call's callbacks come
// one after another; a flowing call (StreamHeader.flow) has a read and a write
// in flight at once, and the reactor hands their callbacks to its FlowStream
// (flow_stream.h), whose mutex serialises them.
#ifndef TENSOROPS_SERVER_GRPC_STREAM_REACTOR_H_
#define TENSOROPS_SERVER_GRPC_STREAM_REACTOR_H_

#include <grpcpp/support/byte_buffer.h>

#include "server/core/call.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

namespace tensorops {

// A new reactor for one ExecuteStream call (its Call under `method`,
// GrpcMethods::execute_stream); it deletes itself in OnDone. `pipeline`
// must outlive it.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewExecuteStreamReactor(
    CallPipeline* pipeline, const CallMethod* method, grpc::CallbackServerContext* ctx);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_GRPC_STREAM_REACTOR_H_
