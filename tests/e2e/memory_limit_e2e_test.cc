// A server under a real memory limit (a memory cgroup this test creates:
// v2 memory.max or v1 memory.limit_in_bytes) with no memory flags: it
// derives its budgets from the limit, and a burst through both doors at once
// whose total is several times the limit (gRPC: large Execute calls and
// ExecuteStream uploads; HTTP/REST: binary infers with a Content-Length and
// chunked bodies) is answered with RESOURCE_EXHAUSTED (gRPC) or 503/413 with
// a JSON error (REST) for the excess instead of an OOM kill. Every admitted
// call's result is checked byte for byte.
//
// Needs root and a writable cgroup hierarchy; skipped (ctest SKIP) otherwise.
// Label "memlimit"; 30-60 s on 2 cores. MEMLIMIT_DUMP=1 prints the server's
// log after the burst (with MEMLIMIT_TEST_SERVER_FLAG=--access_log=true, a
// line for every call: when each was refused, and why).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/harness/http_post.h"
#include "tests/harness/server_process.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

using ::tensorops::testing::HttpPost;
using ::tensorops::testing::HttpPostAnswer;
using ::tensorops::testing::HttpPostOptions;
using ::tensorops::testing::ServerProcess;

constexpr int64_t kLimitBytes = int64_t{1} << 30;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// A memory cgroup of its own, removed at the end.
class MemoryCgroup {
 public:
  // Empty dir() when this machine does not let us create one.
  explicit MemoryCgroup(int64_t limit) {
    const std::string name = absl::StrCat("tensorops-memlimit-test-", getpid());
    // cgroup v2: the memory controller enabled for children of the root.
    if (absl::StrContains(ReadFile("/sys/fs/cgroup/cgroup.subtree_control"), "memory")) {
      const std::string dir = "/sys/fs/cgroup/" + name;
      if (mkdir(dir.c_str(), 0755) == 0) {
        if (WriteFile(dir + "/memory.max", std::to_string(limit)) &&
            (WriteFile(dir + "/memory.swap.max", "0") || true)) {
          dir_ = dir;
          v2_ = true;
          return;
        }
        rmdir(dir.c_str());
      }
    }
    // cgroup v1.
    const std::string dir = "/sys/fs/cgroup/memory/" + name;
    if (mkdir(dir.c_str(), 0755) == 0) {
      if (WriteFile(dir + "/memory.limit_in_bytes", std::to_string(limit))) {
        WriteFile(dir + "/memory.memsw.limit_in_bytes", std::to_string(limit));  // no swap
        dir_ = dir;
        return;
      }
      rmdir(dir.c_str());
    }
  }
  ~MemoryCgroup() {
    if (dir_.empty()) return;
    for (int i = 0; i < 100 && rmdir(dir_.c_str()) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  const std::string& dir() const { return dir_; }
  bool v2() const { return v2_; }
  // OOM kills in this cgroup so far (v2 memory.events, v1 memory.oom_control).
  int64_t OomKills() const {
    std::istringstream in(ReadFile(dir_ + (v2_ ? "/memory.events" : "/memory.oom_control")));
    std::string key;
    int64_t value = 0;
    while (in >> key >> value) {
      if (key == "oom_kill") return value;
    }
    return 0;
  }
  int64_t PeakBytes() const {
    if (v2_) return -1;  // memory.peak is not in every kernel
    return std::atoll(ReadFile(dir_ + "/memory.max_usage_in_bytes").c_str());
  }

 private:
  std::string dir_;
  bool v2_ = false;
};

// A wrapper shell that puts itself into the cgroup and execs the server (so
// everything the server allocates counts), and the server's log (its
// stderr); both removed at the end.
struct CgroupServerFiles {
  explicit CgroupServerFiles(const MemoryCgroup& cgroup) {
    char log_template[] = "/tmp/memlimit_server_log.XXXXXX";
    const int log_fd = mkstemp(log_template);
    if (log_fd >= 0) close(log_fd);
    log = log_template;
    wrapper = log + ".sh";
    WriteFile(wrapper,
              absl::StrCat("#!/bin/sh\necho $$ > ", cgroup.dir(), "/cgroup.procs || exit 97\nexec ",
                           TENSOROPS_SERVER_PATH, " \"$@\" 2>>", log, "\n"));
    chmod(wrapper.c_str(), 0755);
  }
  CgroupServerFiles(const CgroupServerFiles&) = delete;
  CgroupServerFiles& operator=(const CgroupServerFiles&) = delete;
  ~CgroupServerFiles() {
    unlink(wrapper.c_str());
    unlink(log.c_str());
  }
  std::string wrapper, log;
};

uint8_t Value(int64_t i, int64_t salt) {
  return static_cast<uint8_t>(((i + salt) * 0x9E3779B1ull) >> 23);
}

// Empty when `out` is Reverse(axis 0) of the 1-D input Value(i, salt).
std::string CheckReversed(const Tensor& out, int64_t n, int64_t salt) {
  if (out.dtype() != DataType::kUInt8 || out.bytes().size() != static_cast<size_t>(n)) {
    return "wrong type or size";
  }
  const absl::Span<const char> b = out.bytes();
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<uint8_t>(b[i]) != Value(n - 1 - i, salt)) {
      return absl::StrCat("wrong byte at ", i);
    }
  }
  return "";
}

// A binary REST infer of Reverse (axis 0) over Value(i, salt), i < n, its
// output binary too.
struct RestInfer {
  std::string body;
  HttpPostOptions options;
};
RestInfer ReverseInfer(int64_t n, int64_t salt, int64_t chunk_bytes) {
  const std::string json =
      absl::StrCat(R"({"inputs":[{"name":"data","shape":[)", n,
                   R"(],"datatype":"UINT8","parameters":{"binary_data_size":)", n,
                   R"(}},{"name":"axis","shape":[1],"datatype":"INT64","data":[0]}],)",
                   R"("parameters":{"mode":"index","binary_data_output":true}})");
  RestInfer r;
  r.body.reserve(json.size() + static_cast<size_t>(n));
  r.body = json;
  for (int64_t j = 0; j < n; ++j) r.body.push_back(static_cast<char>(Value(j, salt)));
  r.options.headers = absl::StrCat("Inference-Header-Content-Length: ", json.size(), "\r\n");
  r.options.chunk_bytes = chunk_bytes;
  r.options.timeout_ms = 120000;
  return r;
}

// Empty when `a` is a 200 whose binary output is Reverse of Value(i, salt).
std::string CheckRestReversed(const HttpPostAnswer& a, int64_t n, int64_t salt) {
  int64_t json = 0;
  if (!absl::SimpleAtoi(a.Field("Inference-Header-Content-Length"), &json) ||
      static_cast<int64_t>(a.body.size()) != json + n) {
    return "wrong answer size";
  }
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<uint8_t>(a.body[json + i]) != Value(n - 1 - i, salt)) {
      return absl::StrCat("wrong byte at ", i);
    }
  }
  return "";
}

// A refusal as the REST door must give it: 503 or 413 with a JSON error.
bool IsJsonRefusal(const HttpPostAnswer& a) {
  return (a.status == 503 || a.status == 413) && a.Field("Content-Type") == "application/json" &&
         absl::StartsWith(a.body, R"({"error":")");
}

TEST(MemoryLimitE2ETest, BurstPastTheLimitIsRefusedNotKilled) {
  MemoryCgroup cgroup(kLimitBytes);
  if (cgroup.dir().empty()) {
    GTEST_SKIP() << "cannot create a memory cgroup here (needs root and a writable "
                    "/sys/fs/cgroup with the memory controller)";
  }
  ServerProcess server;
  std::vector<std::string> flags = {"--metrics_port=0", "--threads=2", "--http_port=0"};
  // For measuring what each bound does (docs/memory.md), e.g. --grpc_memory_bytes=0.
  if (const char* extra = std::getenv("MEMLIMIT_TEST_SERVER_FLAG")) flags.push_back(extra);
  const CgroupServerFiles files(cgroup);
  const std::string& log_path = files.log;
  ASSERT_TRUE(server.Start(files.wrapper, flags).ok());

  // The budgets it derived, from the cgroup's limit (logged before "started").
  std::string log;
  for (int i = 0; i < 200 && !absl::StrContains(log, "started:"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = ReadFile(log_path);
  }
  std::printf("%s", log.c_str());
  EXPECT_TRUE(
      absl::StrContains(log, absl::StrCat("memory limit ", kLimitBytes, " bytes from cgroup")))
      << log;
  EXPECT_TRUE(absl::StrContains(
      log, absl::StrCat("max_inflight_bytes ", kLimitBytes / 10 * 4, " (derived)")))
      << log;

  ClientOptions options;
  options.target = server.address();
  options.default_deadline = std::chrono::seconds(120);
  constexpr int kUnary = 12;   // 64 MiB each: 128 MiB of budget
  constexpr int kStreams = 4;  // 128 MiB each: 256 MiB of budget
  constexpr int64_t kUnaryBytes = int64_t{64} << 20;
  constexpr int64_t kStreamBytes = int64_t{128} << 20;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kUnary + kStreams; ++i) {
    auto c = Client::Create(options);
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  std::vector<std::vector<uint8_t>> inputs(kUnary + kStreams);
  for (int i = 0; i < kUnary + kStreams; ++i) {
    const int64_t n = i < kUnary ? kUnaryBytes : kStreamBytes;
    inputs[i].resize(n);
    for (int64_t j = 0; j < n; ++j) inputs[i][j] = Value(j, i);
  }

  // The REST burst: binary infers with a Content-Length, and chunked ones
  // (1 MiB chunks), sent with the gRPC burst.
  constexpr int kRestWhole = 8;    // 64 MiB each: 128 MiB of budget
  constexpr int kRestChunked = 2;  // 200 MiB each: 400 MiB of budget
  constexpr int64_t kRestWholeBytes = int64_t{64} << 20;
  constexpr int64_t kRestChunkedBytes = int64_t{200} << 20;
  std::vector<RestInfer> rest;
  std::vector<int64_t> rest_n;
  for (int i = 0; i < kRestWhole + kRestChunked; ++i) {
    const bool chunked = i >= kRestWhole;
    rest_n.push_back(chunked ? kRestChunkedBytes : kRestWholeBytes);
    rest.push_back(ReverseInfer(rest_n.back(), 100 + i, chunked ? int64_t{1} << 20 : 0));
  }
  const int http_port = server.http_port();
  ASSERT_GT(http_port, 0);
  const int64_t rss_before = server.StatusKiB("VmRSS:") >> 10;

  std::atomic<int> rest_ok{0}, rest_503{0}, rest_413{0}, rest_other{0};
  std::atomic<int> ok{0}, refused{0}, other{0}, wrong{0};
  std::mutex mu;
  std::vector<std::string> others;
  std::map<std::string, int> refusals;  // message (cut) -> count
  std::atomic<bool> go{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < kUnary + kStreams; ++i) {
    callers.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      const int64_t n = static_cast<int64_t>(inputs[i].size());
      CallOptions call;
      call.transport = i < kUnary ? Transport::kUnary : Transport::kStream;
      const ExecuteResult r = clients[i]->Execute(
          "Reverse", {{"mode", "index"}},
          {Tensor::View(inputs[i].data(), {n}), Tensor(std::vector<int64_t>{0})}, call);
      if (r.ok()) {
        ++ok;
        const std::string bad = r->size() == 1 ? CheckReversed((*r)[0], n, i) : "no output";
        if (!bad.empty()) {
          ++wrong;
          std::lock_guard<std::mutex> lock(mu);
          others.push_back(absl::StrCat("call ", i, ": ", bad));
        }
      } else if (r.status().code() == absl::StatusCode::kResourceExhausted) {
        ++refused;
        std::lock_guard<std::mutex> lock(mu);
        refusals[std::string(r.status().message()).substr(0, 60)]++;
      } else {
        ++other;
        std::lock_guard<std::mutex> lock(mu);
        others.push_back(absl::StrCat("call ", i, ": ", r.status().ToString()));
      }
    });
  }
  for (int i = 0; i < kRestWhole + kRestChunked; ++i) {
    callers.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      const HttpPostAnswer a =
          HttpPost(http_port, "/v2/models/Reverse/infer", rest[i].body, rest[i].options);
      std::lock_guard<std::mutex> lock(mu);
      if (a.status == 200) {
        ++rest_ok;
        const std::string bad = CheckRestReversed(a, rest_n[i], 100 + i);
        if (!bad.empty()) {
          ++wrong;
          others.push_back(absl::StrCat("REST call ", i, ": ", bad));
        }
      } else if (IsJsonRefusal(a)) {
        ++(a.status == 503 ? rest_503 : rest_413);
        refusals[absl::StrCat("REST ", a.status, " ", a.body.substr(0, 60))]++;
      } else {
        ++rest_other;
        others.push_back(absl::StrCat("REST call ", i, ": status ", a.status, " ", a.error, " ",
                                      a.body.substr(0, 200)));
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  go = true;
  for (auto& t : callers) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "limit %lld MiB; %d Execute x %lld MiB + %d ExecuteStream x %lld MiB (%lld MiB of "
      "budget asked): %d OK, %d RESOURCE_EXHAUSTED, %d other, in %.1f s; peak %lld MiB, "
      "server RSS now %lld MiB, OOM kills %lld\n",
      static_cast<long long>(kLimitBytes >> 20), kUnary, static_cast<long long>(kUnaryBytes >> 20),
      kStreams, static_cast<long long>(kStreamBytes >> 20),
      static_cast<long long>((2 * (kUnary * kUnaryBytes + kStreams * kStreamBytes)) >> 20),
      ok.load(), refused.load(), other.load(), seconds,
      static_cast<long long>(cgroup.PeakBytes() >> 20),
      static_cast<long long>(server.StatusKiB("VmRSS:") >> 10),
      static_cast<long long>(cgroup.OomKills()));
  std::printf(
      "REST: %d x %lld MiB Content-Length + %d x %lld MiB chunked: %d 200 (verified), %d 503, "
      "%d 413, %d other; server RSS before the burst %lld MiB, peak (VmHWM) %lld MiB\n",
      kRestWhole, static_cast<long long>(kRestWholeBytes >> 20), kRestChunked,
      static_cast<long long>(kRestChunkedBytes >> 20), rest_ok.load(), rest_503.load(),
      rest_413.load(), rest_other.load(), static_cast<long long>(rss_before),
      static_cast<long long>(server.StatusKiB("VmHWM:") >> 10));
  for (const std::string& s : others) std::printf("  %s\n", s.c_str());
  for (const auto& [message, n] : refusals) std::printf("  %d x %s\n", n, message.c_str());
  if (std::getenv("MEMLIMIT_DUMP")) std::printf("%s", ReadFile(log_path).c_str());

  EXPECT_EQ(cgroup.OomKills(), 0);
  EXPECT_TRUE(server.Signal(0)) << "the server died";
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(rest_other.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  // Each door admitted and each refused, whichever arrived first. The doors
  // share one budget; a REST body is reserved at its header, a gRPC message
  // only once received whole, so on a loaded machine the REST burst held the
  // whole budget before any gRPC call asked (0 of 16 gRPC calls admitted, 4
  // REST bodies) until a call refused only because the budget is busy waited
  // for it (CallPipeline::Options::budget_wait).
  EXPECT_GT(ok.load(), 0) << "no gRPC call was admitted";
  EXPECT_GT(rest_ok.load(), 0) << "no REST call was admitted";
  EXPECT_GT(refused.load(), 0) << "every gRPC call fit: make the burst bigger";
  EXPECT_GT(rest_503.load() + rest_413.load(), 0) << "every REST call fit: make the burst bigger";

  // Still serving: one more call of each kind, one at a time, goes through.
  for (int i : {0, kUnary}) {
    const int64_t n = static_cast<int64_t>(inputs[i].size());
    CallOptions call;
    call.transport = i < kUnary ? Transport::kUnary : Transport::kStream;
    const ExecuteResult r = clients[i]->Execute(
        "Reverse", {{"mode", "index"}},
        {Tensor::View(inputs[i].data(), {n}), Tensor(std::vector<int64_t>{0})}, call);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(CheckReversed((*r)[0], n, i), "");
  }
  // And one REST call of each kind.
  for (int i : {0, kRestWhole}) {
    const HttpPostAnswer a =
        HttpPost(http_port, "/v2/models/Reverse/infer", rest[i].body, rest[i].options);
    ASSERT_EQ(a.status, 200) << a.error << " " << a.body.substr(0, 200);
    EXPECT_EQ(CheckRestReversed(a, rest_n[i], 100 + i), "");
  }
  EXPECT_EQ(cgroup.OomKills(), 0);
  std::printf("after: server RSS %lld MiB, peak (VmHWM) %lld MiB, cgroup peak %lld MiB\n",
              static_cast<long long>(server.StatusKiB("VmRSS:") >> 10),
              static_cast<long long>(server.StatusKiB("VmHWM:") >> 10),
              static_cast<long long>(cgroup.PeakBytes() >> 20));
  clients.clear();
  EXPECT_EQ(server.Stop(), 0);
}

// 1 GiB UINT8 tensors [kRows, kCols], one per stream, made of rows of one
// table of random bytes (row r of stream i starts at r * kRowStep +
// i * kStreamStep): rows overlap, so a piece put at the wrong row or column,
// or a wrong shift, does not match. Sources copy and sinks compare with
// memcpy/memcmp, so the client keeps up with eight streams on 2 cores.
class RolledRows {
 public:
  static constexpr int64_t kRows = 8192, kCols = 131072, kShift = 1000;
  explicit RolledRows(int streams) : table_(static_cast<size_t>(RowStart(kRows, streams) + kCols)) {
    std::mt19937_64 rng(::tensorops::testing::TestSeed(37));
    for (char& c : table_) c = static_cast<char>(rng());
  }
  // Stream i's input bytes [offset, offset + n) into out.
  void Read(int i, int64_t offset, int64_t n, char* out) const {
    ByRow(offset, n, [&](int64_t r, int64_t c, int64_t len, int64_t at) {
      std::memcpy(out + at, &table_[RowStart(r, i) + c], len);
      return true;
    });
  }
  // Whether `data` is stream i's output at `offset` (Roll by kShift along
  // axis 1: output column c is input column (c - kShift) mod kCols).
  bool Matches(int i, int64_t offset, absl::string_view data) const {
    return ByRow(offset, static_cast<int64_t>(data.size()),
                 [&](int64_t r, int64_t c, int64_t len, int64_t at) {
                   for (int64_t k = 0; k < len;) {
                     const int64_t col = c + k, from = (col - kShift + kCols) % kCols;
                     const int64_t run =
                         std::min(len - k, col < kShift ? kShift - col : kCols - col);
                     const char* want = &table_[RowStart(r, i) + from];
                     if (std::memcmp(data.data() + at + k, want, run) != 0) return false;
                     k += run;
                   }
                   return true;
                 });
  }

 private:
  static constexpr int64_t kRowStep = 7919, kStreamStep = 1013;
  static int64_t RowStart(int64_t r, int i) { return r * kRowStep + i * kStreamStep; }
  // Calls f(row, column, length, position in the piece) for each row's part
  // of the bytes [offset, offset + n); false as soon as f is.
  template <typename F>
  static bool ByRow(int64_t offset, int64_t n, const F& f) {
    for (int64_t done = 0; done < n;) {
      const int64_t r = (offset + done) / kCols, c = (offset + done) % kCols;
      const int64_t len = std::min(n - done, kCols - c);
      if (!f(r, c, len, done)) return false;
      done += len;
    }
    return true;
  }
  std::vector<char> table_;
};

// Stream i's flowing Roll through the SDK: "" when it finished OK with every
// output byte right and each received once, else what went wrong.
std::string FlowingRoll(const ClientOptions& options, const RolledRows& rows, int i) {
  auto client = Client::Create(options);
  if (!client.ok()) return client.status().ToString();
  using R = RolledRows;
  std::unique_ptr<StreamSource> source = CallbackSource(DataType::kUInt8, {R::kRows, R::kCols},
                                                        [&](int64_t offset, int64_t n, char* out) {
                                                          rows.Read(i, offset, n, out);
                                                          return absl::OkStatus();
                                                        });
  int64_t received = 0, bad = -1;
  std::unique_ptr<StreamSink> sink = CallbackSink(
      [&](int64_t offset, absl::string_view data) {
        received += static_cast<int64_t>(data.size());
        if (bad < 0 && !rows.Matches(i, offset, data)) bad = offset;
        return absl::OkStatus();
      },
      [] {});
  CallOptions call;
  call.flow = true;
  const absl::Status s = (*client)->ExecuteStreamed(
      "Roll", {}, source.get(),
      {Tensor(std::vector<int64_t>{R::kShift}), Tensor(std::vector<int64_t>{1})}, {}, sink.get(),
      call);
  if (s.ok() && bad < 0 && received == R::kRows * R::kCols) return "";
  return absl::StrCat(s.ToString(), ", ", received, " bytes received, first wrong byte at ", bad);
}

// Issue 37/45: eight flowing ExecuteStream calls of 1 GiB each (Roll of a
// UINT8 [8192, 131072] along its rows) at once against a server in a
// 512 MiB cgroup. A flowing stream holds only its window
// (--stream_window_bytes, 16 MiB) however big its tensor, so all eight fit:
// each finishes OK, every output byte is checked where it lands (pieces
// come at any offset) and counted once, and nothing is OOM-killed.
//
// The server runs with --grpc_bdp_probe=false: with gRPC's BDP probe on (the
// default) each stream's HTTP/2 window grows and the transport holds
// 16-32 MiB for a stream at moments; on a loaded machine (the server reading
// slowly) gRPC's derived quota (20%, 102 MiB) then cut 7 of the 8 with
// RST_STREAM ENHANCE_YOUR_CALM while the cgroup peaked at 255 MiB
// (docs/reliability.md). MEMLIMIT_TEST_SERVER_FLAG adds one
// server flag (=--grpc_bdp_probe=true shows that), MEMLIMIT_FLOW_STREAMS
// sets the number of streams.
TEST(MemoryLimitE2ETest, EightFlowingGiBStreamsInHalfAGiB) {
  constexpr int64_t kLimit = int64_t{512} << 20;
  MemoryCgroup cgroup(kLimit);
  if (cgroup.dir().empty()) {
    GTEST_SKIP() << "cannot create a memory cgroup here (needs root and a writable "
                    "/sys/fs/cgroup with the memory controller)";
  }
  const CgroupServerFiles files(cgroup);
  ServerProcess server;
  std::vector<std::string> flags = {"--metrics_port=0", "--threads=2", "--grpc_bdp_probe=false"};
  if (const char* extra = std::getenv("MEMLIMIT_TEST_SERVER_FLAG")) flags.push_back(extra);
  ASSERT_TRUE(server.Start(files.wrapper, flags).ok());
  // MEMLIMIT_FLOW_STREAMS: fewer (or more) streams, to see what one costs.
  const char* streams_env = std::getenv("MEMLIMIT_FLOW_STREAMS");
  const int kStreams = streams_env != nullptr ? std::atoi(streams_env) : 8;
  ClientOptions options;
  options.target = server.address();
  options.default_deadline = std::chrono::seconds(1800);
  const RolledRows rows(kStreams);
  std::atomic<int> ok{0}, wrong{0};
  std::mutex mu;
  std::vector<std::string> problems;
  std::vector<std::thread> callers;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kStreams; ++i) {
    callers.emplace_back([&, i] {
      const std::string problem = FlowingRoll(options, rows, i);
      std::lock_guard<std::mutex> lock(mu);
      if (problem.empty()) {
        ++ok;
      } else {
        ++wrong;
        problems.push_back(absl::StrCat("stream ", i, ": ", problem));
      }
    });
  }
  for (auto& t : callers) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "limit %lld MiB; %d flowing Roll streams x 1 GiB at once: %d OK (every byte checked), "
      "%d failed, in %.1f s; server VmHWM %lld MiB, cgroup peak %lld MiB, OOM kills %lld\n",
      static_cast<long long>(kLimit >> 20), kStreams, ok.load(), wrong.load(), seconds,
      static_cast<long long>(server.StatusKiB("VmHWM:") >> 10),
      static_cast<long long>(cgroup.PeakBytes() >> 20), static_cast<long long>(cgroup.OomKills()));
  for (const std::string& p : problems) std::printf("  %s\n", p.c_str());
  if (!problems.empty()) {
    // The server's log names what cut them (GRPC_TRACE=resource_quota adds gRPC's reclaimer).
    const std::string log = ReadFile(files.log);
    std::printf("server log (last 4 KiB):\n%s\n",
                log.substr(log.size() > 4096 ? log.size() - 4096 : 0).c_str());
  }
  EXPECT_EQ(ok.load(), kStreams);
  EXPECT_EQ(cgroup.OomKills(), 0);
  EXPECT_TRUE(server.Signal(0)) << "the server died";
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace tensorops
