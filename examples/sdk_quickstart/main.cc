// Runs Roll (OpenVINO spec example 2) on a tensorops server and prints the result.
// usage: sdk_quickstart [TARGET]   (default 127.0.0.1:50051)
#include <cstdint>
#include <cstdio>
#include <vector>

#include "tensorops/client.h"

int main(int argc, char** argv) {
  tensorops::ClientOptions options;
  if (argc > 1) options.target = argv[1];
  options.default_deadline = std::chrono::seconds(10);
  auto client = tensorops::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "sdk_quickstart: %s\n", client.status().ToString().c_str());
    return 1;
  }

  const tensorops::Tensor data(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3});
  const tensorops::Tensor shift(std::vector<int64_t>{-1, 2});
  const tensorops::Tensor axes(std::vector<int64_t>{0, 1});
  absl::StatusOr<tensorops::Tensor> out = (*client)->Roll(data, shift, axes);
  if (!out.ok()) {
    std::fprintf(stderr, "sdk_quickstart: %s\n", out.status().ToString().c_str());
    return 1;
  }

  std::printf("%s:", out->DebugString().c_str());
  for (int32_t v : out->values<int32_t>()) std::printf(" %d", v);
  std::printf("\n");
  return 0;
}
