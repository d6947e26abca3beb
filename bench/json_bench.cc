// The HTTP/REST door's JSON binding on one core (BENCHMARKS.md "HTTP/REST"):
// an infer body of one FP32 tensor as JSON -> the Open Inference Protocol's
// request (JsonInferRequest::Parse: parse, check, convert to raw FP32), and
// an FP32 output -> the JSON answer (JsonInferResponse::Encode). Reported as
// MB/s of JSON text (bytes_per_second), the goal being >= 100 MB/s each way
// for a 16 MiB tensor; memcpy of the same text is the baseline.
//
// The request's numbers are written as a client that holds doubles writes
// them (17 significant digits for an FP32 value, as Python's json and
// NumPy's tolist() do); the answer's as the server writes them (shortest
// round-trip form of each FP32 value).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/http/json_binding.h"

namespace tensorops {
namespace {

std::vector<float> Values(int64_t n) {
  std::mt19937 rng(19);
  std::normal_distribution<float> d(0.0f, 100.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

std::string RequestJson(const std::vector<float>& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.SetMaxDecimalPlaces(324);
  w.StartObject();
  w.Key("inputs");
  w.StartArray();
  w.StartObject();
  w.Key("name");
  w.String("data");
  w.Key("datatype");
  w.String("FP32");
  w.Key("shape");
  w.StartArray();
  w.Int64(static_cast<int64_t>(v.size()));
  w.EndArray();
  w.Key("data");
  w.StartArray();
  for (float x : v) w.Double(static_cast<double>(x));
  w.EndArray();
  w.EndObject();
  for (const char* name : {"shift", "axes"}) {
    w.StartObject();
    w.Key("name");
    w.String(name);
    w.Key("datatype");
    w.String("INT64");
    w.Key("shape");
    w.StartArray();
    w.EndArray();
    w.Key("data");
    w.StartArray();
    w.Int64(0);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

void BM_ParseFp32Json(benchmark::State& state) {
  const int64_t n = state.range(0) / 4;
  const std::string body = RequestJson(Values(n));
  const RequestLimits limits;
  for (auto _ : state) {
    auto parsed = JsonInferRequest::Parse(body, std::nullopt, "Roll", "", limits);
    if (!parsed.ok()) {
      state.SkipWithError(std::string(parsed.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(parsed->get());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
  state.counters["json_bytes"] = static_cast<double>(body.size());
}

void BM_EncodeFp32Json(benchmark::State& state) {
  const int64_t n = state.range(0) / 4;
  const std::vector<float> v = Values(n);
  // A request that asks for nothing special: every output as JSON.
  const std::string small = RequestJson(Values(1));
  auto request = JsonInferRequest::Parse(small, std::nullopt, "Roll", "", RequestLimits());
  if (!request.ok()) {
    state.SkipWithError(std::string(request.status().message()).c_str());
    return;
  }
  const int64_t shape[1] = {n};
  int64_t bytes = 0;
  for (auto _ : state) {
    JsonInferResponse response;
    response.SetModel("Roll", "1", "");
    char* out = response.AddOutput("output", "FP32", shape, n * 4);
    std::memcpy(out, v.data(), static_cast<size_t>(n) * 4);
    JsonText json;
    std::vector<Tensor> binary;
    if (!response.Encode(**request, &json, &binary).ok()) {
      state.SkipWithError("Encode failed");
      break;
    }
    bytes = static_cast<int64_t>(json.size());
    benchmark::DoNotOptimize(json.view().data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["json_bytes"] = static_cast<double>(bytes);
}

// Baseline: memcpy of a request's worth of JSON text.
void BM_MemcpyJsonText(benchmark::State& state) {
  const std::string body = RequestJson(Values(state.range(0) / 4));
  std::string copy(body.size(), '\0');
  for (auto _ : state) {
    std::memcpy(copy.data(), body.data(), body.size());
    benchmark::DoNotOptimize(copy.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}

BENCHMARK(BM_ParseFp32Json)->Arg(64 << 10)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeFp32Json)->Arg(64 << 10)->Arg(16 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyJsonText)->Arg(16 << 20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tensorops

BENCHMARK_MAIN();
