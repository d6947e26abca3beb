// The SDK's streamed call, timed as a user makes it: Client::Roll of a
// 1-D UINT8 tensor of --tensor_bytes (1 GiB by default) held in the caller's
// memory (a Tensor::View), shift n/3+1, which the SDK streams
// (ExecuteStream; flowing unless --flow=false) because the input is over
// ClientOptions::stream_threshold_bytes. --calls calls one after the other;
// each prints one JSON line with its seconds and GB/s (tensor bytes / call
// seconds, as `load_tool --mode=stream` prints for the echo's EchoStream, its
// baseline in bench/speed_guard.sh). Every 4093rd output byte (and the last)
// is checked against the input rolled; a mismatch or a failed call exits 1.
//
// Usage: sdk_stream_bench --address=127.0.0.1:PORT [--tensor_bytes=1073741824]
//                         [--calls=3] [--flow=true]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tensorops/client.h"

ABSL_FLAG(std::string, address, "", "the server, HOST:PORT");
ABSL_FLAG(int64_t, tensor_bytes, int64_t{1} << 30, "bytes of the UINT8 tensor rolled");
ABSL_FLAG(int, calls, 3, "calls, one after the other");
ABSL_FLAG(bool, flow, true, "a flowing stream (CallOptions::flow)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sdk_stream_bench --address=HOST:PORT [--tensor_bytes=N] [--calls=3] [--flow=true]");
  absl::ParseCommandLine(argc, argv);
  const std::string address = absl::GetFlag(FLAGS_address);
  const int64_t bytes = absl::GetFlag(FLAGS_tensor_bytes);
  const int calls = absl::GetFlag(FLAGS_calls);
  const bool flow = absl::GetFlag(FLAGS_flow);
  if (address.empty() || bytes <= 0 || calls <= 0) {
    std::fprintf(stderr, "sdk_stream_bench: --address, --tensor_bytes > 0, --calls > 0\n");
    return 2;
  }
  tensorops::ClientOptions options;
  options.target = address;
  auto client = tensorops::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "sdk_stream_bench: %s\n", client.status().ToString().c_str());
    return 1;
  }
  // A pattern that does not repeat at the shift, so a wrong roll shows.
  std::unique_ptr<uint8_t[]> input(new uint8_t[static_cast<size_t>(bytes)]);
  for (int64_t i = 0; i < bytes; ++i) input[i] = static_cast<uint8_t>((i * 7 + i / 251) & 0xff);
  const tensorops::Tensor data = tensorops::Tensor::View(input.get(), {bytes});
  const int64_t shift = bytes / 3 + 1;
  const tensorops::Tensor shift_t(std::vector<int64_t>{shift});
  const tensorops::Tensor axes_t(std::vector<int64_t>{0});
  tensorops::CallOptions call;
  call.transport = tensorops::Transport::kStream;
  call.flow = flow;
  call.deadline = std::chrono::minutes(5);
  for (int c = 0; c < calls; ++c) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<tensorops::Tensor> out = (*client)->Roll(data, shift_t, axes_t, call);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string error;
    bool verified = false;
    if (!out.ok()) {
      error = out.status().ToString();
    } else if (out->bytes().size() != static_cast<size_t>(bytes)) {
      error = "output size differs";
    } else {
      const auto* o = reinterpret_cast<const uint8_t*>(out->bytes().data());
      verified = o[(bytes - 1 + shift) % bytes] == input[bytes - 1];
      for (int64_t i = 0; i < bytes; i += 4093) {
        if (o[(i + shift) % bytes] != input[i]) verified = false;
      }
      if (!verified) error = "output differs from the input rolled";
    }
    for (char& ch : error) {
      if (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20) ch = '\'';
    }
    std::printf(
        "{\"mode\":\"sdk_stream\",\"op\":\"roll_uint8%s\",\"tensor_bytes\":%lld,\"call\":%d,"
        "\"seconds\":%.4f,\"gb_per_s\":%.3f,\"verified\":%s,\"error\":\"%s\"}\n",
        flow ? "_flow" : "", static_cast<long long>(bytes), c, seconds,
        seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0, verified ? "true" : "false",
        error.c_str());
    std::fflush(stdout);
    if (!verified) return 1;
  }
  return 0;
}
