#include "server/grpc/raw_unary.h"

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <climits>
#include <new>

#include "absl/strings/str_cat.h"
#include "kernels/huge_pages.h"
#include "wire/proto_check.h"

namespace tensorops {

SliceBuffer::SliceBuffer(int64_t bytes) : size_(bytes) {
  // At least one byte: malloc(0) may return null, and a slice needs a buffer.
  data_.reset(static_cast<char*>(std::malloc(bytes > 0 ? static_cast<size_t>(bytes) : 1)));
  if (data_ == nullptr) throw std::bad_alloc();
  AdviseHugePages(data_.get(), bytes);  // before the kernel first touches it
}

grpc::Slice SliceBuffer::Release() {
  const auto size = static_cast<size_t>(size_);
  size_ = 0;
  return grpc::Slice(data_.release(), size, &std::free);
}

absl::Status ParseRequest(grpc::ByteBuffer* buffer, google::protobuf::Message* message) {
  // gRPC runs a raw method's handler even when the request never arrived
  // (its stream was reset first, e.g. by the memory quota's reclaimer), with
  // no buffer at all; an empty message arrives as an empty buffer. Without
  // this, such a call was logged and counted as INVALID_ARGUMENT "op is
  // empty" (memory_limit_e2e_test's access log).
  if (!buffer->Valid()) {
    return absl::CancelledError("the request never arrived: the call ended before its message");
  }
  bool parsed;
  {
    // As gRPC's own deserialiser (GenericDeserialize): protobuf reads the
    // slices through a ZeroCopyInputStream, with no limit but 2 GiB (the
    // server's message limit came first).
    grpc::ProtoBufferReader reader(buffer);
    google::protobuf::io::CodedInputStream decoder(&reader);
    decoder.SetTotalBytesLimit(INT_MAX);
    parsed = message->ParseFromCodedStream(&decoder) && decoder.ConsumedEntireMessage();
  }
  if (parsed) {
    buffer->Clear();
    return absl::OkStatus();
  }
  // The error path only: one copy of the body to say what is wrong with it.
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (buffer->Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  buffer->Clear();
  absl::Status why = ExplainParseFailure(message->GetDescriptor(), bytes);
  if (!why.ok()) return why;
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", message->GetDescriptor()->full_name(),
                   " (protobuf cannot parse its ", bytes.size(), " bytes)"));
}

absl::Status SerializeReply(const google::protobuf::Message& message, grpc::ByteBuffer* reply) {
  bool own_buffer = false;
  const grpc::Status s = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
      message, reply, &own_buffer);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("encoding the reply failed: ", s.error_message()));
  }
  return absl::OkStatus();
}

void SetReply(const std::string& header, std::vector<grpc::Slice> parts, grpc::ByteBuffer* reply) {
  std::vector<grpc::Slice> slices;
  slices.reserve(parts.size() + 1);
  slices.emplace_back(header);  // a small copy: the header's own slice
  for (grpc::Slice& p : parts) {
    if (p.size() > 0) slices.push_back(std::move(p));
  }
  *reply = grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace tensorops
