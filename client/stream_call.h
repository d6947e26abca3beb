// The SDK's streamed call (ExecuteStream), one job per file:
//   stream_call.cc  the call: its header (types, shapes, CRC-32s), sending
//                   the inputs in chunks, reading the replies (ReplyReader:
//                   offsets and CRCs checked, flowing or not), progress
//                   reported on the calling thread; Client::Impl::Stream,
//                   ExecuteStream and Client::ExecuteStreamed;
//   stream_io.cc    the sources and sinks it reads from and writes to.
// Private to the SDK (not under include/).
//
// Thread-safety: StreamInput is a value.
#ifndef TENSOROPS_CLIENT_STREAM_CALL_H_
#define TENSOROPS_CLIENT_STREAM_CALL_H_

#include <cstdint>
#include <vector>

#include "tensorops/client.h"

namespace tensorops {
inline namespace client_v1 {

// One streamed input: a Tensor held whole, or a source read chunk by chunk.
struct StreamInput {
  const Tensor* tensor = nullptr;
  StreamSource* source = nullptr;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

}  // namespace client_v1
}  // namespace tensorops

#endif  // TENSOROPS_CLIENT_STREAM_CALL_H_
