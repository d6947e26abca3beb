#include "client/unary_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include <climits>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "client/tensor_access.h"
#include "wire/raw_fields.h"

namespace tensorops::client_internal {
namespace {

void ReleaseOwner(void* owner) { delete static_cast<std::shared_ptr<const void>*>(owner); }

// `t`'s bytes as a slice: an owned tensor's in place, a View's copied once.
grpc::Slice BytesSlice(const Tensor& t) {
  std::shared_ptr<const void> owner = TensorAccess::Owner(t);
  absl::string_view data(t.bytes().data(), t.bytes().size());
  if (owner == nullptr) {
    auto copy = std::make_shared<const std::string>(data);
    data = *copy;
    owner = std::move(copy);
  }
  return grpc::Slice(const_cast<char*>(data.data()), data.size(), &ReleaseOwner,
                     new std::shared_ptr<const void>(std::move(owner)));
}

}  // namespace

grpc::ByteBuffer EncodeExecuteRequest(v1::ExecuteRequest* request,
                                      const std::vector<const Tensor*>& outside) {
  // op (1) and attrs (2) by protobuf, then each input (3), then the steps
  // (4): protobuf's own order, so the bytes are the stub's.
  google::protobuf::RepeatedPtrField<v1::Tensor> inputs;
  google::protobuf::RepeatedPtrField<v1::Step> then;
  inputs.Swap(request->mutable_inputs());
  then.Swap(request->mutable_then());
  std::string head = request->SerializeAsString();
  inputs.Swap(request->mutable_inputs());
  then.Swap(request->mutable_then());

  std::vector<grpc::Slice> slices;
  for (int i = 0; i < request->inputs_size(); ++i) {
    const Tensor* t = static_cast<size_t>(i) < outside.size() ? outside[i] : nullptr;
    std::string tensor = request->inputs(i).SerializeAsString();
    const uint64_t n = t == nullptr ? 0 : t->bytes().size();
    if (t != nullptr) AppendLengthDelimited(3, n, &tensor);  // raw_data: the tensor's last field
    AppendLengthDelimited(3, tensor.size() + n, &head);
    head += tensor;
    if (t != nullptr) {
      slices.emplace_back(head);
      head.clear();
      slices.push_back(BytesSlice(*t));
    }
  }
  for (const v1::Step& step : request->then()) {
    AppendLengthDelimited(4, step.ByteSizeLong(), &head);
    step.AppendToString(&head);
  }
  if (!head.empty()) slices.emplace_back(head);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status DecodeExecuteReply(grpc::ByteBuffer* reply, v1::ExecuteResponse* response) {
  bool parsed = false;
  if (static_cast<int64_t>(reply->Length()) < kUnaryOutsideMinBytes) {
    grpc::ProtoBufferReader reader(reply);
    google::protobuf::io::CodedInputStream decoder(&reader);
    decoder.SetTotalBytesLimit(INT_MAX);
    parsed = response->ParseFromCodedStream(&decoder) && decoder.ConsumedEntireMessage();
  } else {
    std::vector<grpc::Slice> slices;
    if (reply->Dump(&slices).ok()) {
      std::vector<absl::string_view> segments;
      segments.reserve(slices.size());
      for (const grpc::Slice& s : slices) {
        segments.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      SegmentCursor cursor(std::move(segments));
      // outputs (1), each one's raw_data (3) outside protobuf.
      parsed = ParseWithBytesOutside(&cursor, cursor.remaining(), 1, 3, response);
    }
  }
  reply->Clear();
  if (!parsed) {
    return absl::InternalError(
        "malformed reply from server: not a valid tensorops.v1.ExecuteResponse");
  }
  return absl::OkStatus();
}

}  // namespace tensorops::client_internal
