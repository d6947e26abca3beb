// Overload and faults against the real server: many concurrent clients mix
// valid, invalid, oversize, deadline-short, cancelled and abandoned streamed
// calls against a server with small limits. Checked: no crash, only the
// status codes each kind of call may get, every OK reply verified, the
// gauges back at zero afterwards (no stuck work, no growing queue), and the
// server's resident memory not growing from one round of load to the next.
//
// Bounded: rounds of a fixed duration, a deadline on every call.
#include <grpcpp/grpcpp.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/http_get.h"
#include "tests/harness/server_process.h"
#include "tests/sanitizers.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using Clock = std::chrono::steady_clock;

void SetRaw(v1::Tensor* t, v1::DataType dtype, const std::vector<int64_t>& shape, const void* data,
            size_t bytes) {
  t->set_dtype(dtype);
  for (int64_t d : shape) t->add_shape(d);
  t->set_raw_data(data, bytes);
}

template <typename T>
void SetVector(v1::Tensor* t, v1::DataType dtype, const std::vector<T>& v) {
  SetRaw(t, dtype, {static_cast<int64_t>(v.size())}, v.data(), v.size() * sizeof(T));
}

// The kinds of call in the mix, and the codes each may end with.
enum Kind {
  kValidSmall,  // Roll of int32 [rows, cols]: OK, or refused under overload
  kValidLarge,  // Reverse of 1 MiB of uint8: OK, or refused under overload
  kInvalid,     // axes out of range
  kUnknownOp,
  kOversizeTensor,   // past --max_tensor_bytes
  kOversizeMessage,  // past --max_message_bytes
  kDeadlineShort,    // 2 MiB Reverse with a 1-3 ms deadline
  kCancelled,        // a 2 MiB Reverse cancelled from another thread after 0-2 ms
  kAbandonedStream,  // ExecuteStream: header and some chunks, then cancelled
  kNumKinds
};
const char* const kKindNames[] = {"valid_small",    "valid_large",     "invalid",
                                  "unknown_op",     "oversize_tensor", "oversize_message",
                                  "deadline_short", "cancelled",       "abandoned_stream"};

bool Allowed(Kind kind, grpc::StatusCode code) {
  using C = grpc::StatusCode;
  switch (kind) {
    case kValidSmall:
    case kValidLarge:
      return code == C::OK || code == C::RESOURCE_EXHAUSTED;
    case kInvalid:
      return code == C::INVALID_ARGUMENT;
    case kUnknownOp:
      return code == C::UNIMPLEMENTED;
    case kOversizeTensor:
    case kOversizeMessage:
      return code == C::RESOURCE_EXHAUSTED;
    case kDeadlineShort:
      return code == C::OK || code == C::DEADLINE_EXCEEDED || code == C::RESOURCE_EXHAUSTED;
    case kCancelled:
      return code == C::OK || code == C::CANCELLED || code == C::RESOURCE_EXHAUSTED;
    case kAbandonedStream:
      return code == C::CANCELLED || code == C::RESOURCE_EXHAUSTED;
    default:
      return false;
  }
}

class Driver {
 public:
  explicit Driver(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetMaxReceiveMessageSize(-1);
    for (int i = 0; i < 4; ++i) {
      args.SetInt("tensorops.channel", i);  // four distinct connections
      stubs_.push_back(v1::TensorOps::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
    }
    large_.resize(size_t{1} << 20);
    for (size_t i = 0; i < large_.size(); ++i) large_[i] = static_cast<uint8_t>(i * 7 + (i >> 10));
  }

  // Runs `threads` clients for `duration`; returns calls per (kind, code).
  std::map<std::pair<int, int>, int64_t> Round(int threads, std::chrono::milliseconds duration) {
    std::map<std::pair<int, int>, int64_t> counts;
    std::mutex mu;
    std::vector<std::thread> workers;
    const auto end = Clock::now() + duration;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937 rng(::tensorops::testing::TestSeed(static_cast<uint32_t>(t * 7919 + seed_++)));
        std::map<std::pair<int, int>, int64_t> mine;
        while (Clock::now() < end) {
          const Kind kind = static_cast<Kind>(rng() % kNumKinds);
          const grpc::StatusCode code = Call(kind, *stubs_[t % stubs_.size()], rng);
          ++mine[{kind, code}];
        }
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& [k, n] : mine) counts[k] += n;
      });
    }
    for (auto& w : workers) w.join();
    return counts;
  }

  int64_t verify_failures() const { return verify_failures_.load(); }

 private:
  grpc::StatusCode Call(Kind kind, v1::TensorOps::Stub& stub, std::mt19937& rng) {
    if (kind == kAbandonedStream) return AbandonStream(stub, rng);
    v1::ExecuteRequest req;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    std::vector<int32_t> small;
    int64_t rows = 0, cols = 0, shift = 0;
    std::vector<uint8_t> big;
    switch (kind) {
      case kValidSmall:
      case kInvalid:
      case kUnknownOp: {
        rows = 1 + rng() % 64;
        cols = 1 + rng() % 40;
        shift = static_cast<int64_t>(rng() % 200) - 100;
        small.resize(rows * cols);
        for (auto& v : small) v = static_cast<int32_t>(rng());
        req.set_op(kind == kUnknownOp ? "Transpose" : "Roll");
        SetRaw(req.add_inputs(), v1::DATA_TYPE_INT32, {rows, cols}, small.data(), small.size() * 4);
        SetVector(req.add_inputs(), v1::DATA_TYPE_INT64, std::vector<int64_t>{shift});
        SetVector(req.add_inputs(), v1::DATA_TYPE_INT64,
                  std::vector<int64_t>{kind == kInvalid ? 2 : 1});
        break;
      }
      case kValidLarge:
      case kDeadlineShort:
      case kCancelled:
      case kOversizeTensor:
      case kOversizeMessage: {
        const size_t n = kind == kValidLarge        ? large_.size()
                         : kind == kOversizeTensor  ? (size_t{5} << 20)
                         : kind == kOversizeMessage ? (size_t{9} << 20)
                                                    : (size_t{2} << 20);
        big.resize(n);
        for (size_t i = 0; i < n; i += large_.size()) {
          std::copy(large_.begin(), large_.begin() + std::min(large_.size(), n - i),
                    big.begin() + i);
        }
        req.set_op("Reverse");
        (*req.mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
        SetRaw(req.add_inputs(), v1::DATA_TYPE_UINT8, {static_cast<int64_t>(n / 1024), 1024},
               big.data(), n);
        SetVector(req.add_inputs(), v1::DATA_TYPE_INT64, std::vector<int64_t>{1});
        if (kind == kDeadlineShort) {
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(1 + rng() % 3));
        }
        break;
      }
      default:
        break;
    }
    v1::ExecuteResponse resp;
    grpc::Status status;
    if (kind == kCancelled) {
      std::thread canceller([&ctx, delay = rng() % 3] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
        ctx.TryCancel();
      });
      status = stub.Execute(&ctx, req, &resp);
      canceller.join();
    } else {
      status = stub.Execute(&ctx, req, &resp);
    }
    if (status.ok()) Verify(kind, small, rows, cols, shift, big, resp);
    return status.error_code();
  }

  void Verify(Kind kind, const std::vector<int32_t>& small, int64_t rows, int64_t cols,
              int64_t shift, const std::vector<uint8_t>& big, const v1::ExecuteResponse& resp) {
    bool ok = resp.outputs_size() == 1;
    if (ok && kind == kValidSmall) {
      const std::string& out = resp.outputs(0).raw_data();
      ok = out.size() == small.size() * 4;
      for (int64_t r = 0; ok && r < rows; ++r) {
        for (int64_t c = 0; ok && c < cols; ++c) {
          int32_t v;
          const int64_t dst = (((c + shift) % cols) + cols) % cols;
          std::memcpy(&v, out.data() + (r * cols + dst) * 4, 4);
          ok = v == small[r * cols + c];
        }
      }
    } else if (ok) {  // Reverse along the last axis (1024 wide)
      const std::string& out = resp.outputs(0).raw_data();
      ok = out.size() == big.size();
      for (size_t i = 0; ok && i < big.size(); i += 4099) {
        const size_t row = i / 1024, col = i % 1024;
        ok = static_cast<uint8_t>(out[row * 1024 + 1023 - col]) == big[i];
      }
    }
    if (!ok) verify_failures_.fetch_add(1);
  }

  // Opens a stream for 8 MiB, sends the header and 0-3 MiB, then cancels.
  grpc::StatusCode AbandonStream(v1::TensorOps::Stub& stub, std::mt19937& rng) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = stub.ExecuteStream(&ctx);
    v1::ExecuteStreamRequest m;
    v1::StreamHeader* h = m.mutable_header();
    h->set_op("Reverse");
    (*h->mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
    v1::TensorHeader* d = h->add_inputs();
    d->set_dtype(v1::DATA_TYPE_UINT8);
    d->add_shape(8192);
    d->add_shape(1024);
    v1::TensorHeader* a = h->add_inputs();
    a->set_dtype(v1::DATA_TYPE_INT64);
    a->add_shape(1);
    bool writing = stream->Write(m);
    const int chunks = static_cast<int>(rng() % 4);
    for (int i = 0; writing && i < chunks; ++i) {
      v1::ExecuteStreamRequest c;
      c.mutable_chunk()->set_tensor(0);
      c.mutable_chunk()->set_offset(static_cast<uint64_t>(i) * large_.size());
      c.mutable_chunk()->set_data(large_.data(), large_.size());
      writing = stream->Write(c);
    }
    ctx.TryCancel();
    return stream->Finish().error_code();
  }

  std::vector<std::unique_ptr<v1::TensorOps::Stub>> stubs_;
  std::vector<uint8_t> large_;
  std::atomic<int64_t> verify_failures_{0};
  std::atomic<uint32_t> seed_{1};
};

// Waits until the in-flight gauges and the queue are back at zero.
bool Idle(const ServerProcess& server) {
  for (int i = 0; i < 1000; ++i) {
    if (testing::ScrapeSample(server.metrics_port(), "tensorops_inflight_requests") == 0 &&
        testing::ScrapeSample(server.metrics_port(), "tensorops_inflight_bytes") == 0 &&
        testing::ScrapeSample(server.metrics_port(), "tensorops_queue_depth") == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(OverloadTest, MixedHostileLoadLeavesNoStuckWorkAndNoGrowth) {
  ServerProcess server;
  // RSS after a round must measure what the server still holds, not the
  // allocator's high-water mark, which depends on how many calls a loaded
  // machine happened to overlap (the check failed that way in CI). So
  // freed memory goes back to the OS at once: glibc's mmap threshold fixed
  // at 32 KiB (a fixed value also turns off its dynamic raising), the heap
  // trimmed past 128 KiB free, one arena as --malloc_tuning has (with one
  // per thread, fragmentation grew RSS by 50 MiB a round), no buffer cache.
  // Measured: RSS after rounds 0-3 within 3 MiB of each other (at 128 KiB,
  // heap fragmentation still moved it by 37 MiB).
  setenv("GLIBC_TUNABLES",
         "glibc.malloc.mmap_threshold=32768:glibc.malloc.trim_threshold=131072:glibc.malloc.arena_"
         "max=1",
         1);
  const absl::Status started = server.Start(
      TENSOROPS_SERVER_PATH,
      {"--metrics_port=0", "--threads=2", "--max_queue=8", "--max_inflight_bytes=33554432",
       "--max_tensor_bytes=4194304", "--max_message_bytes=8388608", "--stream_chunk_bytes=1048576",
       "--malloc_tuning=false", "--buffer_cache_bytes=0"});
  unsetenv("GLIBC_TUNABLES");
  ASSERT_TRUE(started.ok()) << started;
  Driver driver(server.address());
  const int kThreads = 24;
  const auto kRound = std::chrono::milliseconds(4000);

  // Round 0 warms up: the allocator's working set and gRPC's buffers grow to
  // what this load needs. Later rounds must not grow the server past it.
  std::vector<int64_t> rss;
  std::map<std::pair<int, int>, int64_t> total;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    for (const auto& [k, n] : driver.Round(kThreads, kRound)) total[k] += n;
    ASSERT_TRUE(Idle(server)) << "work left in flight after the load";
    rss.push_back(server.StatusKiB("VmRSS:"));
    std::printf("round %d: server RSS %lld KiB\n", round, static_cast<long long>(rss.back()));
  }
  int64_t calls = 0;
  std::map<int, int64_t> per_kind;
  for (const auto& [k, n] : total) {
    const Kind kind = static_cast<Kind>(k.first);
    const auto code = static_cast<grpc::StatusCode>(k.second);
    std::printf("%-16s code %2d: %lld\n", kKindNames[kind], k.second, static_cast<long long>(n));
    EXPECT_TRUE(Allowed(kind, code))
        << kKindNames[kind] << " ended with code " << k.second << " (" << n << " calls)";
    calls += n;
    per_kind[kind] += n;
  }
  EXPECT_EQ(driver.verify_failures(), 0);
  for (int k = 0; k < kNumKinds; ++k) EXPECT_GT(per_kind[k], 0) << kKindNames[k];
  // The overload really happened, and valid work still got through.
  EXPECT_GT((total[{kValidSmall, 0}] + total[{kValidLarge, 0}]), 0);
  // Calls ended by their client (deadline, cancel) while the server held
  // them: Execute's 1-3 ms deadlines and 0-2 ms cancels often pass before the
  // 2 MiB request has even arrived (one CI run: 0 of 660 reached the server),
  // so the abandoned streams, which the server always holds, count too.
  // (Under a sanitizer the server may see none of them at all.)
  if (!testing::kSanitized) {
    const int port = server.metrics_port();
    const auto code = [port](const char* method, const char* c) {
      // -1 (no such series yet) counts as none.
      return std::max(0.0,
                      testing::ScrapeSample(port, "tensorops_requests_total",
                                            {{"method", method}, {"op", "Reverse"}, {"code", c}}));
    };
    EXPECT_GT(code("Execute", "DEADLINE_EXCEEDED") + code("Execute", "CANCELLED") +
                  code("ExecuteStream", "DEADLINE_EXCEEDED") + code("ExecuteStream", "CANCELLED"),
              0);
  }
  std::printf("%lld calls in %d rounds\n", static_cast<long long>(calls), 4);

  // No growth after the warm-up round: at most 16 MiB over round 1's RSS
  // (not under sanitizers: they keep freed memory).
  if (!testing::kSanitized) {
    EXPECT_LE(rss[3], rss[1] + 16 * 1024)
        << "RSS per round (KiB): " << rss[0] << " " << rss[1] << " " << rss[2] << " " << rss[3];
  }
  // Still serving, and a clean stop.
  EXPECT_EQ(testing::ScrapeSample(server.metrics_port(), "tensorops_pool_threads"), 2);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace tensorops
