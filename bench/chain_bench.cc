// A chain of 8 ops in one Execute against the same 8 ops as 8 sequential
// Execute calls (each sending the previous reply's tensor back) and against
// one single-op call, on one tensor, end to end through a running server.
// The three are run in turn, `--rounds` times; the medians and their ratios
// are printed, and the chain's reply is checked against the sequential one.
//
// Run: bench/chain_table.sh (starts the server), or
//   build/bench/chain_bench --target=127.0.0.1:50051 [--mib=64] [--rounds=7]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "tensorops server address");
ABSL_FLAG(int, mib, 64, "tensor size in MiB (FLOAT32 [64, n, 256])");
ABSL_FLAG(int, rounds, 7, "rounds of the three measurements");

namespace {

using tensorops::v1::DataType;
using tensorops::v1::ExecuteRequest;
using tensorops::v1::ExecuteResponse;
using tensorops::v1::Step;
using tensorops::v1::Tensor;

struct OpCall {
  std::string op;
  std::vector<std::vector<int64_t>> inputs;  // index inputs after the data, INT64 1-D
  bool index_mode = false;                   // Reverse: attrs {mode: "index"}
};

void SetIndexInputs(const OpCall& c, google::protobuf::RepeatedPtrField<Tensor>* out) {
  for (const auto& v : c.inputs) {
    Tensor* t = out->Add();
    t->set_dtype(tensorops::v1::DATA_TYPE_INT64);
    t->add_shape(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
}

void SetMode(const OpCall& c, google::protobuf::Struct* attrs) {
  if (c.index_mode) (*attrs->mutable_fields())["mode"].set_string_value("index");
}

ExecuteRequest Request(const OpCall& first, const Tensor& data, const std::vector<OpCall>& then) {
  ExecuteRequest req;
  req.set_op(first.op);
  SetMode(first, req.mutable_attrs());
  *req.add_inputs() = data;
  SetIndexInputs(first, req.mutable_inputs());
  for (const OpCall& c : then) {
    Step* s = req.add_then();
    s->set_op(c.op);
    SetMode(c, s->mutable_attrs());
    SetIndexInputs(c, s->mutable_inputs());
  }
  return req;
}

double Call(tensorops::v1::TensorOps::Stub* stub, const ExecuteRequest& req,
            ExecuteResponse* resp) {
  grpc::ClientContext ctx;
  const auto t0 = std::chrono::steady_clock::now();
  grpc::Status s = stub->Execute(&ctx, req, resp);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    std::fprintf(stderr, "chain_bench: %s: %s\n", req.op().c_str(), s.error_message().c_str());
    std::exit(1);
  }
  return secs;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t bytes = int64_t{absl::GetFlag(FLAGS_mib)} << 20;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(absl::GetFlag(FLAGS_target),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = tensorops::v1::TensorOps::NewStub(channel);

  Tensor data;
  data.set_dtype(tensorops::v1::DATA_TYPE_FLOAT32);
  const int64_t n = bytes / 4 / (64 * 256);
  for (int64_t d : {int64_t{64}, n, int64_t{256}}) data.add_shape(d);
  std::string raw(static_cast<size_t>(64 * n * 256 * 4), '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i * 2654435761u >> 24);
  data.set_raw_data(std::move(raw));

  // Reverses and Rolls on every axis: one pass when chained.
  const std::vector<OpCall> ops = {{"Reverse", {{0}}, true}, {"Roll", {{-3}, {2}}},
                                   {"Reverse", {{1}}, true}, {"Roll", {{7}, {0}}},
                                   {"Reverse", {{2}}, true}, {"Roll", {{11}, {1}}},
                                   {"Reverse", {{0}}, true}, {"Roll", {{1}, {2}}}};
  const std::vector<OpCall> rest(ops.begin() + 1, ops.end());
  const ExecuteRequest single = Request(ops[0], data, {});
  const ExecuteRequest chain = Request(ops[0], data, rest);

  std::vector<double> t_single, t_seq, t_chain;
  ExecuteResponse resp;
  Call(stub.get(), single, &resp);  // warm the connection and the server's buffers
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    t_single.push_back(Call(stub.get(), single, &resp));
    double seq = 0;
    Tensor current = data;
    for (const OpCall& c : ops) {
      ExecuteResponse out;
      seq += Call(stub.get(), Request(c, current, {}), &out);
      current = std::move(*out.mutable_outputs(0));
    }
    t_seq.push_back(seq);
    ExecuteResponse chained;
    t_chain.push_back(Call(stub.get(), chain, &chained));
    if (chained.outputs(0).raw_data() != current.raw_data()) {
      std::fprintf(stderr, "chain_bench: the chain's reply differs from the 8 calls'\n");
      return 1;
    }
  }
  const double s = Median(t_single), q = Median(t_seq), c = Median(t_chain);
  std::printf("tensor: FLOAT32 [64, %lld, 256], %lld MiB; %d rounds (medians)\n",
              static_cast<long long>(n), static_cast<long long>(bytes >> 20),
              absl::GetFlag(FLAGS_rounds));
  std::printf("one op call:          %8.1f ms\n", s * 1e3);
  std::printf("8 sequential calls:   %8.1f ms\n", q * 1e3);
  std::printf("one chain of 8 ops:   %8.1f ms\n", c * 1e3);
  std::printf("chain vs 8 calls:     %8.2fx faster (goal >= 5)\n", q / c);
  std::printf("chain vs one op call: %8.2fx the time (goal <= 1.3)\n", c / s);
  return 0;
}
