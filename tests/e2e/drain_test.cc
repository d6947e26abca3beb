// SIGTERM under continuous load, against the real tensorops-server binary.
//
// The rule (README "Shutdown"): every call admitted before the signal ends
// OK; every call that reaches the server after it ends OK or UNAVAILABLE
// (retryable), however long the clients keep sending and whatever the
// timing; no call ends CANCELLED, INTERNAL or UNKNOWN unless its client
// cancelled it; the server exits 0 within --drain_timeout plus a small bound.
//
// Unlike service_e2e_test's SIGTERM test, the clients here never hold off:
// 16 unary clients send 1 MiB Rolls back to back, and 2 stream clients upload
// 4 MiB Rolls in slow chunks (so some are mid-upload at the signal), from
// before the signal until a second after the server has gone (under
// sanitizers: 8 clients of 256 KiB and 1 stream client). Repeated so a race
// seen once in three runs cannot pass by luck.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tensorops/v1/tensorops.grpc.pb.h"
#include "tests/harness/http_get.h"
#include "tests/harness/server_process.h"
#include "tests/sanitizers.h"

namespace tensorops {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kServer[] = TENSOROPS_SERVER_PATH;
// Sanitizer builds (server and this client) run 5-15x slower: the same
// pattern with less data and fewer clients still keeps the server busy
// through the signal, and the rule checked is the same.
constexpr int64_t kUnaryBytes = testing::kSanitized ? int64_t{256} << 10 : int64_t{1} << 20;
constexpr int kUnaryClients = testing::kSanitized ? 8 : 16;
constexpr int kStreamClients = testing::kSanitized ? 1 : 2;
constexpr int64_t kStreamBytes = int64_t{4} << 20;
constexpr int64_t kChunkBytes = int64_t{256} << 10;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  return testing::NewTestChannel(address);
}

std::string Bytes(int64_t n, uint32_t seed) {
  std::string s(static_cast<size_t>(n), '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// Roll of a 1-D UINT8 tensor by 1: out[i] = in[i - 1 mod n].
std::string Rolled(const std::string& in) { return in.back() + in.substr(0, in.size() - 1); }

v1::Tensor Int64Vector(int64_t v) {
  v1::Tensor t;
  t.set_dtype(v1::DATA_TYPE_INT64);
  t.add_shape(1);
  t.add_int64_data(v);
  return t;
}

v1::ExecuteRequest RollRequest(const std::string& data) {
  v1::ExecuteRequest req;
  req.set_op("Roll");
  v1::Tensor* d = req.add_inputs();
  d->set_dtype(v1::DATA_TYPE_UINT8);
  d->add_shape(static_cast<int64_t>(data.size()));
  d->set_raw_data(data);
  *req.add_inputs() = Int64Vector(1);
  *req.add_inputs() = Int64Vector(0);
  return req;
}

std::string CodeName(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    default:
      return "code " + std::to_string(st.error_code());
  }
}

// What the clients saw, by moment and code.
struct Tally {
  std::mutex mu;
  std::map<std::string, int> counts;  // "unary before: OK" -> n
  std::vector<std::string> failures;  // anything the rule forbids

  void Add(const std::string& kind, bool after, const grpc::Status& st, const std::string& wrong) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string code = CodeName(st);
    ++counts[kind + (after ? " after: " : " before: ") + code];
    const bool allowed = st.ok() || st.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!allowed && failures.size() < 20) {
      failures.push_back(kind + (after ? " sent after SIGTERM" : " sent before SIGTERM") + ": " +
                         code + " " + st.error_message());
    }
    if (st.ok() && !wrong.empty() && failures.size() < 20) {
      failures.push_back(kind + ": OK with a wrong result: " + wrong);
    }
  }
  int Count(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const auto& [k, v] : counts) {
      if (k.rfind(prefix, 0) == 0) n += v;
    }
    return n;
  }
};

// One streamed Roll of `data`, uploaded in kChunkBytes pieces with a pause
// between them (so the upload spans the signal now and then). `midway`, if
// set, runs after half of the data chunks.
grpc::Status StreamRoll(v1::TensorOps::Stub* stub, const std::string& data, std::string* wrong,
                        const std::function<void()>& midway = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto rw = stub->ExecuteStream(&ctx);
  v1::ExecuteStreamRequest msg;
  v1::StreamHeader* h = msg.mutable_header();
  h->set_op("Roll");
  v1::TensorHeader* d = h->add_inputs();
  d->set_dtype(v1::DATA_TYPE_UINT8);
  d->add_shape(static_cast<int64_t>(data.size()));
  d->set_crc32(static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()))));
  const int64_t one = 1, zero = 0;
  for (int64_t v : {one, zero}) {
    v1::TensorHeader* s = h->add_inputs();
    s->set_dtype(v1::DATA_TYPE_INT64);
    s->add_shape(1);
    s->set_crc32(static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(&v), 8)));
  }
  bool writing = rw->Write(msg);
  for (int64_t off = 0; writing && off < static_cast<int64_t>(data.size()); off += kChunkBytes) {
    if (midway && off == static_cast<int64_t>(data.size()) / 2) midway();
    msg.Clear();
    v1::TensorChunk* c = msg.mutable_chunk();
    c->set_tensor(0);
    c->set_offset(static_cast<uint64_t>(off));
    c->set_data(data.substr(static_cast<size_t>(off), static_cast<size_t>(kChunkBytes)));
    writing = rw->Write(msg);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (uint32_t t = 1; writing && t <= 2; ++t) {
    msg.Clear();
    v1::TensorChunk* c = msg.mutable_chunk();
    c->set_tensor(t);
    c->set_offset(0);
    const int64_t v = t == 1 ? 1 : 0;
    c->set_data(std::string(reinterpret_cast<const char*>(&v), 8));
    writing = rw->Write(msg);
  }
  if (writing) rw->WritesDone();
  std::string out;
  v1::ExecuteStreamResponse resp;
  while (rw->Read(&resp)) {
    if (resp.has_chunk()) out += resp.chunk().data();
  }
  grpc::Status st = rw->Finish();
  if (st.ok() && out != Rolled(data)) *wrong = "streamed output differs from the reference";
  return st;
}

struct RunResult {
  int exit_status = -1;
  int64_t exit_ms = 0;
};

// One server, 16 unary + 2 stream clients sending without pause from before
// SIGTERM until `keep_sending` after the server exited.
RunResult RunOnce(int run, Tally* tally, int drain_seconds) {
  RunResult result;
  testing::ServerProcess server;
  const absl::Status started =
      server.Start(kServer, {"--threads=2", "--metrics_port=-1",
                             "--drain_timeout=" + std::to_string(drain_seconds) + "s"});
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return result;
  std::vector<std::unique_ptr<v1::TensorOps::Stub>> stubs;
  for (int i = 0; i < 4; ++i) stubs.push_back(v1::TensorOps::NewStub(NewChannel(server.address())));

  std::atomic<bool> signalled{false};
  std::atomic<bool> stop{false};
  std::atomic<int> ok_before{0};
  std::atomic<int> streams_ok_before{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kUnaryClients; ++t) {
    threads.emplace_back([&, t] {
      const std::string data = Bytes(kUnaryBytes, static_cast<uint32_t>(run * 100 + t));
      const v1::ExecuteRequest req = RollRequest(data);
      const std::string expected = Rolled(data);
      v1::TensorOps::Stub* stub = stubs[t % stubs.size()].get();
      while (!stop.load()) {
        const bool after = signalled.load();
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        v1::ExecuteResponse resp;
        const grpc::Status st = stub->Execute(&ctx, req, &resp);
        std::string wrong;
        if (st.ok() && (resp.outputs_size() != 1 || resp.outputs(0).raw_data() != expected)) {
          wrong = "unary output differs from the reference";
        }
        tally->Add("unary", after, st, wrong);
        if (st.ok() && !after) ok_before.fetch_add(1);
        // A refused call comes back at once; do not spin the CPU the server needs.
        if (!st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  for (int t = 0; t < kStreamClients; ++t) {
    threads.emplace_back([&, t] {
      const std::string data = Bytes(kStreamBytes, static_cast<uint32_t>(run * 100 + 50 + t));
      v1::TensorOps::Stub* stub = stubs[t].get();
      while (!stop.load()) {
        const bool after = signalled.load();
        std::string wrong;
        const grpc::Status st = StreamRoll(stub, data, &wrong);
        tally->Add("stream", after, st, wrong);
        if (st.ok() && !after) streams_ok_before.fetch_add(1);
        if (!st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  // Load first, then the signal in the middle of it.
  // (Sanitizer builds run 5-15x slower: a smaller warm-up still puts the
  // signal in the middle of the load.)
  const int warm_calls = testing::kSanitized ? 20 : 200;
  const auto warm_deadline = Clock::now() + std::chrono::seconds(30);
  // At least one whole stream too: under ASan one 4 MiB upload in slow
  // chunks can outlast 20 unary calls (a CI run signalled before any
  // stream had finished).
  while ((ok_before.load() < warm_calls || streams_ok_before.load() < 1) &&
         Clock::now() < warm_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(ok_before.load(), warm_calls) << "run " << run << ": the load never built up";
  EXPECT_GE(streams_ok_before.load(), 1)
      << "run " << run << ": no stream finished before the signal";
  signalled.store(true);
  EXPECT_TRUE(server.Signal(SIGTERM));
  const auto signalled_at = Clock::now();
  result.exit_status = server.WaitForExit((drain_seconds + 10) * 1000);
  result.exit_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - signalled_at).count();
  // Keep sending at the closed port a moment longer: those calls must be
  // UNAVAILABLE too. (Not for long: another test's server may get the port.)
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop.store(true);
  for (auto& th : threads) th.join();
  return result;
}

TEST(DrainTest, ContinuousLoadThroughSigtermSeesOnlyOkOrUnavailable) {
  const int runs = testing::kSanitized ? 2 : 5;
  constexpr int kDrainSeconds = 5;
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    Tally tally;
    const RunResult r = RunOnce(run, &tally, kDrainSeconds);
    EXPECT_TRUE(WIFEXITED(r.exit_status) && WEXITSTATUS(r.exit_status) == 0)
        << "exit status " << r.exit_status << " after " << r.exit_ms << " ms";
    // Nothing admitted can hold the drain here (each call is a few ms), so
    // the exit comes well within the drain timeout.
    EXPECT_LT(r.exit_ms, (kDrainSeconds + (testing::kSanitized ? 12 : 2)) * 1000);
    EXPECT_TRUE(tally.failures.empty())
        << tally.failures.size() << " calls broke the rule; first: " << tally.failures.front();
    EXPECT_GT(tally.Count("unary after: UNAVAILABLE"), 0);
    EXPECT_GT(tally.Count("stream before: OK"), 0);
    std::string summary;
    for (const auto& [k, v] : tally.counts) summary += "  " + k + " = " + std::to_string(v) + "\n";
    std::printf("run %d: exit %d after %lld ms\n%s", run, r.exit_status,
                static_cast<long long>(r.exit_ms), summary.c_str());
  }
}

// A streamed call admitted before the signal (its header was read and it
// holds its budget: the in-flight gauge says 1) whose upload is only half
// done when SIGTERM arrives: the drain waits for it, and it ends OK with the
// right result; a call started after the signal is refused UNAVAILABLE.
TEST(DrainTest, StreamMidUploadAtSigtermEndsOk) {
  testing::ServerProcess server;
  const absl::Status started =
      server.Start(kServer, {"--threads=2", "--metrics_port=0", "--drain_timeout=10s"});
  ASSERT_TRUE(started.ok()) << started;
  auto stub = v1::TensorOps::NewStub(NewChannel(server.address()));
  auto late_stub = v1::TensorOps::NewStub(NewChannel(server.address()));
  const std::string data = Bytes(kStreamBytes, 7);
  grpc::Status late;
  std::string wrong;
  const grpc::Status st = StreamRoll(stub.get(), data, &wrong, [&] {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (testing::ScrapeSample(server.metrics_port(), "tensorops_inflight_requests", {}) != 1 &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(server.Signal(SIGTERM));
    // The drain has begun (health, admission closed) and waits for this call.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ExecuteResponse resp;
    late = late_stub->Execute(&ctx, RollRequest(Bytes(1024, 8)), &resp);
  });
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  EXPECT_EQ(wrong, "");
  EXPECT_EQ(late.error_code(), grpc::StatusCode::UNAVAILABLE) << late.error_message();
  const int exit_status = server.WaitForExit(15000);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
}

}  // namespace
}  // namespace tensorops
