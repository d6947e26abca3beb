// Soak: mixed traffic against one server for a while (120 s by default;
// TENSOROPS_SOAK_SECONDS=600 for the full 10 minutes), sampled every second.
//
// Traffic (24 worker threads, each one kind of call at a time, plus 2 stream
// uploaders): small and 1-16 MiB Execute (SDK), ExecuteStream uploads of
// 64-256 MiB (SDK), ModelInfer raw and typed, ModelInfer through system
// shared memory with a register/unregister per call, Execute calls cancelled
// after 0-3 ms and ones whose 1-5 ms deadline expires. Every OK reply is
// verified. Sampled: server RSS, open fds, threads, tensorops_inflight_*
// and tensorops_queue_depth gauges (TENSOROPS_SOAK_CSV=path writes them).
// TENSOROPS_SOAK_SERVER_FLAGS adds server flags (space-separated).
//
// Pass: no wrong result, no unexpected error (only OK, and CANCELLED /
// DEADLINE_EXCEEDED for the calls that ask for them); RSS levels (the floor,
// the smallest sample, of each 60 s) after the first minute lie on a line
// that rises by at most 10% over the run (the server's allocator as shipped,
// --malloc_tuning and --malloc_trim_interval; runs of 4 minutes and more;
// in a shorter run the floor of each 10 s after minute one stays within 10%
// of the floor of seconds 50-60 plus --buffer_cache_bytes); after the load, the gauges at 0, fds
// back to their idle count, and threads at most 8 over it (gRPC keeps the threads its pool started
// for a peak). Label "soak".
#include <dirent.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tensorops/client.h"
#include "tests/harness/http_get.h"
#include "tests/harness/server_process.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using Clock = std::chrono::steady_clock;
using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr int64_t kCacheBytes = int64_t{512} << 20;

int CountFds(pid_t pid) {
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

struct Sample {
  double t = 0;
  int64_t rss_kib = 0;
  int fds = 0;
  int64_t threads = 0;
  double inflight_requests = 0, inflight_bytes = 0, queue_depth = 0;
};

Sample TakeSample(const ServerProcess& server, double t) {
  Sample s;
  s.t = t;
  s.rss_kib = server.StatusKiB("VmRSS:");
  s.fds = CountFds(server.pid());
  // "Threads:" is a count; StatusKiB parses any numeric field.
  s.threads = server.StatusKiB("Threads:");
  const int port = server.metrics_port();
  s.inflight_requests = testing::ScrapeSample(port, "tensorops_inflight_requests");
  s.inflight_bytes = testing::ScrapeSample(port, "tensorops_inflight_bytes");
  s.queue_depth = testing::ScrapeSample(port, "tensorops_queue_depth");
  return s;
}

uint8_t Value(int64_t i, int64_t salt) {
  return static_cast<uint8_t>(((i + salt) * 0x9E3779B1ull) >> 23);
}

enum Kind {
  kSmall,
  kMedium,
  kStream,
  kInferRaw,
  kInferTyped,
  kShm,
  kCancelled,
  kDeadline,
  kNumKinds
};
const char* const kKindNames[] = {"Execute small",  "Execute 1-16 MiB", "ExecuteStream",
                                  "ModelInfer raw", "ModelInfer typed", "shared memory",
                                  "cancelled",      "deadline"};

struct Tally {
  std::mutex mu;
  std::map<std::pair<int, std::string>, int64_t> codes;  // (kind, code) -> calls
  std::vector<std::string> problems;                     // first few
  std::atomic<int64_t> wrong{0}, unexpected{0};
  void Count(Kind k, const std::string& code) {
    std::lock_guard<std::mutex> lock(mu);
    ++codes[{k, code}];
  }
  void Problem(std::atomic<int64_t>* counter, const std::string& what) {
    ++*counter;
    std::lock_guard<std::mutex> lock(mu);
    if (problems.size() < 20) problems.push_back(what);
  }
};

// Reverse (index mode, axis 0) of a 1-D UINT8 tensor through the SDK.
void ReverseCall(Client* client, const std::vector<uint8_t>& in, int64_t salt, Transport transport,
                 Kind kind, Tally* tally) {
  const int64_t n = static_cast<int64_t>(in.size());
  CallOptions call;
  call.transport = transport;
  const ExecuteResult r =
      client->Execute("Reverse", {{"mode", "index"}},
                      {Tensor::View(in.data(), {n}), Tensor(std::vector<int64_t>{0})}, call);
  if (!r.ok()) {
    tally->Count(kind, absl::StatusCodeToString(r.status().code()));
    tally->Problem(&tally->unexpected, absl::StrCat(kKindNames[kind], ": ", r.status().ToString()));
    return;
  }
  tally->Count(kind, "OK");
  const absl::Span<const char> b = (*r)[0].bytes();
  bool ok = b.size() == in.size();
  for (int64_t i = 0; ok && i < n; ++i) ok = static_cast<uint8_t>(b[i]) == in[n - 1 - i];
  if (!ok) tally->Problem(&tally->wrong, absl::StrCat(kKindNames[kind], ": wrong result"));
  (void)salt;
}

// Roll of an INT32 [rows, cols] along axis 1 by `shift`, as ModelInfer.
ModelInferRequest RollRequest(const std::vector<int32_t>& data, int64_t rows, int64_t cols,
                              int64_t shift, bool typed) {
  ModelInferRequest r;
  r.set_model_name("Roll");
  auto* d = r.add_inputs();
  d->set_name("data");
  d->set_datatype("INT32");
  d->add_shape(rows);
  d->add_shape(cols);
  for (const char* name : {"shift", "axes"}) {
    auto* t = r.add_inputs();
    t->set_name(name);
    t->set_datatype("INT64");
    t->add_shape(1);
  }
  if (typed) {
    for (int32_t v : data) d->mutable_contents()->add_int_contents(v);
    r.mutable_inputs(1)->mutable_contents()->add_int64_contents(shift);
    r.mutable_inputs(2)->mutable_contents()->add_int64_contents(1);
  } else {
    r.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(int32_t)));
    const int64_t one = 1;
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&shift), 8));
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&one), 8));
  }
  return r;
}

bool RollIsRight(const std::vector<int32_t>& in, int64_t rows, int64_t cols, int64_t shift,
                 const int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t src = ((c - shift) % cols + cols) % cols;
      if (out[r * cols + c] != in[r * cols + src]) return false;
    }
  }
  return true;
}

// The floor (smallest sample) of each whole `interval` seconds of RSS, KiB.
std::vector<int64_t> RssLevels(const std::vector<Sample>& samples, int interval) {
  std::vector<int64_t> levels;
  for (size_t from = 0; from + interval <= samples.size(); from += interval) {
    int64_t m = INT64_MAX;
    for (size_t i = from; i < from + interval; ++i) m = std::min(m, samples[i].rss_kib);
    levels.push_back(m);
  }
  return levels;
}

// The least-squares line through `levels` (one a step): its rise from the
// first step to the last, in % of its value at the first (as
// bench/stack_soak.py's line_rise); 0 for fewer than 3 levels. One high
// level in the middle (a burst the heap kept for a while) moves the line
// less than a slope that runs through the whole run.
double LineRisePercent(const std::vector<int64_t>& levels) {
  const size_t n = levels.size();
  if (n < 3) return 0;
  double mean_y = 0;
  for (int64_t v : levels) mean_y += static_cast<double>(v) / n;
  const double mean_x = (n - 1) / 2.0;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (i - mean_x) * (static_cast<double>(levels[i]) - mean_y);
    sxx += (i - mean_x) * (i - mean_x);
  }
  const double slope = sxy / sxx;
  return 100.0 * slope * (n - 1) / (mean_y - slope * mean_x);
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

TEST(SoakTest, MixedTrafficHoldsSteady) {
  const char* env = std::getenv("TENSOROPS_SOAK_SECONDS");
  const int seconds = env != nullptr ? std::atoi(env) : 120;
  ASSERT_GE(seconds, 70) << "the RSS rule needs more than one minute";
  const std::string shm_prefix = absl::StrCat("/tensorops-soak-", getpid(), "-");
  ServerProcess server;
  // The server's allocator as shipped (--malloc_tuning, --malloc_trim_interval
  // at their defaults): the RSS line is the product's, not a test setting's.
  // TENSOROPS_SOAK_SERVER_FLAGS may change them (e.g. --malloc_trim_interval=0
  // shows the climb the trimmer ends: docs/reliability.md).
  std::vector<std::string> flags = {"--metrics_port=0", "--shared_memory=system",
                                    "--shared_memory_key_prefix=" + shm_prefix,
                                    absl::StrCat("--buffer_cache_bytes=", kCacheBytes)};
  // More server flags, e.g. a short --max_connection_age to see what calls
  // meet at a connection's end many times in one run.
  if (const char* extra = std::getenv("TENSOROPS_SOAK_SERVER_FLAGS")) {
    for (absl::string_view f : absl::StrSplit(extra, ' ', absl::SkipEmpty())) {
      flags.emplace_back(f);
    }
  }
  const absl::Status started = server.Start(TENSOROPS_SERVER_PATH, flags);
  ASSERT_TRUE(started.ok()) << started;
  ClientOptions options;
  options.target = server.address();
  options.default_deadline = std::chrono::seconds(120);
  auto client_or = Client::Create(options);
  ASSERT_TRUE(client_or.ok()) << client_or.status();
  Client* client = client_or->get();
  auto channel = testing::NewTestChannel(server.address());
  auto infer = GRPCInferenceService::NewStub(channel);

  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0};

  // One call of `kind`, with randomness from `rng`; thread index `w`.
  const auto one_call = [&](Kind kind, std::mt19937_64& rng, int w, int64_t iteration) {
    switch (kind) {
      case kSmall:
      case kMedium:
      case kStream: {
        int64_t n = kind == kSmall    ? 16 + rng() % 4096
                    : kind == kMedium ? (int64_t{1} << 20) + rng() % (int64_t{15} << 20)
                                      : (int64_t{64} << 20) + rng() % (int64_t{192} << 20);
        std::vector<uint8_t> in(n);
        const int64_t salt = static_cast<int64_t>(rng() % 1000);
        for (int64_t i = 0; i < n; ++i) in[i] = Value(i, salt);
        ReverseCall(client, in, salt, kind == kStream ? Transport::kStream : Transport::kUnary,
                    kind, &tally);
        break;
      }
      case kInferRaw:
      case kInferTyped: {
        const int64_t rows = 1 + rng() % 64, cols = 1 + rng() % 64, shift = rng() % 100;
        std::vector<int32_t> data(rows * cols);
        for (auto& v : data) v = static_cast<int32_t>(rng());
        ModelInferRequest req = RollRequest(data, rows, cols, shift, kind == kInferTyped);
        ModelInferResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        const grpc::Status st = infer->ModelInfer(&ctx, req, &resp);
        tally.Count(kind, CodeName(st.error_code()));
        if (!st.ok()) {
          tally.Problem(&tally.unexpected,
                        absl::StrCat(kKindNames[kind], ": ", st.error_message()));
        } else if (resp.raw_output_contents_size() != 1 ||
                   resp.raw_output_contents(0).size() != data.size() * 4 ||
                   !RollIsRight(
                       data, rows, cols, shift,
                       reinterpret_cast<const int32_t*>(resp.raw_output_contents(0).data()))) {
          tally.Problem(&tally.wrong, absl::StrCat(kKindNames[kind], ": wrong result"));
        }
        break;
      }
      case kShm: {
        // A fresh object and region per call: register, infer in and out of
        // it, unregister (the churn), unlink.
        const int64_t rows = 1 + rng() % 256, cols = 1 + rng() % 256, shift = rng() % 300;
        const int64_t bytes = rows * cols * 4;
        const std::string key = absl::StrCat(shm_prefix, w, "-", iteration);
        const std::string region = absl::StrCat("soak-", w, "-", iteration);
        const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(ftruncate(fd, 2 * bytes), 0);
        char* map =
            static_cast<char*>(mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        std::vector<int32_t> data(rows * cols);
        for (auto& v : data) v = static_cast<int32_t>(rng());
        std::memcpy(map, data.data(), bytes);
        grpc::Status st;
        {
          grpc::ClientContext ctx;
          inference::SystemSharedMemoryRegisterRequest r;
          r.set_name(region);
          r.set_key(key);
          r.set_byte_size(2 * bytes);
          inference::SystemSharedMemoryRegisterResponse out;
          st = infer->SystemSharedMemoryRegister(&ctx, r, &out);
        }
        if (st.ok()) {
          ModelInferRequest req = RollRequest(data, rows, cols, shift, false);
          req.mutable_raw_input_contents()->DeleteSubrange(0, 1);
          auto& in = *req.mutable_inputs(0)->mutable_parameters();
          in["shared_memory_region"].set_string_param(region);
          in["shared_memory_byte_size"].set_int64_param(bytes);
          auto* o = req.add_outputs();
          o->set_name("output");
          auto& op = *o->mutable_parameters();
          op["shared_memory_region"].set_string_param(region);
          op["shared_memory_offset"].set_int64_param(bytes);
          op["shared_memory_byte_size"].set_int64_param(bytes);
          ModelInferResponse resp;
          grpc::ClientContext ctx;
          st = infer->ModelInfer(&ctx, req, &resp);
          if (st.ok() && !RollIsRight(data, rows, cols, shift,
                                      reinterpret_cast<const int32_t*>(map + bytes))) {
            tally.Problem(&tally.wrong, "shared memory: wrong result");
          }
          grpc::ClientContext uctx;
          inference::SystemSharedMemoryUnregisterRequest u;
          u.set_name(region);
          inference::SystemSharedMemoryUnregisterResponse uout;
          const grpc::Status ust = infer->SystemSharedMemoryUnregister(&uctx, u, &uout);
          if (st.ok()) st = ust;
        }
        tally.Count(kind, CodeName(st.error_code()));
        if (!st.ok()) {
          tally.Problem(&tally.unexpected, absl::StrCat("shared memory: ", st.error_message()));
        }
        munmap(map, 2 * bytes);
        close(fd);
        shm_unlink(key.c_str());
        break;
      }
      case kCancelled:
      case kDeadline: {
        // A 4 MiB raw Roll (ModelInfer) ended by the client: TryCancel after
        // 0-3 ms from another thread, or a 1-5 ms deadline.
        const int64_t rows = 1024, cols = 1024, shift = 1 + rng() % 1000;
        std::vector<int32_t> data(rows * cols);
        for (int64_t i = 0; i < rows * cols; ++i) data[i] = static_cast<int32_t>(i * 31 + w);
        ModelInferRequest req = RollRequest(data, rows, cols, shift, false);
        grpc::ClientContext ctx;
        std::thread canceller;
        if (kind == kDeadline) {
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(1 + rng() % 5));
        } else {
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
          const int delay_us = static_cast<int>(rng() % 3000);
          canceller = std::thread([&ctx, delay_us] {
            std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
            ctx.TryCancel();
          });
        }
        ModelInferResponse resp;
        const grpc::Status st = infer->ModelInfer(&ctx, req, &resp);
        if (canceller.joinable()) canceller.join();
        tally.Count(kind, CodeName(st.error_code()));
        const grpc::StatusCode allowed =
            kind == kDeadline ? grpc::StatusCode::DEADLINE_EXCEEDED : grpc::StatusCode::CANCELLED;
        if (!st.ok() && st.error_code() != allowed) {
          tally.Problem(&tally.unexpected,
                        absl::StrCat(kKindNames[kind], ": ", CodeName(st.error_code()), " ",
                                     st.error_message()));
        } else if (st.ok() && (resp.raw_output_contents_size() != 1 ||
                               resp.raw_output_contents(0).size() != data.size() * 4 ||
                               !RollIsRight(data, rows, cols, shift,
                                            reinterpret_cast<const int32_t*>(
                                                resp.raw_output_contents(0).data())))) {
          tally.Problem(&tally.wrong, absl::StrCat(kKindNames[kind], ": wrong result"));
        }
        break;
      }
      default:
        break;
    }
  };

  // Warm-up: one call of each kind, so idle counts include the channels.
  {
    std::mt19937_64 rng(::tensorops::testing::TestSeed(1));
    for (int k = 0; k < kNumKinds; ++k) {
      if (k != kStream) one_call(static_cast<Kind>(k), rng, 99, k);
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const Sample idle = TakeSample(server, 0);

  // 24 workers over the unary kinds, 2 stream uploaders.
  std::vector<std::thread> workers;
  const Kind kUnaryKinds[] = {kSmall,      kSmall, kMedium, kMedium,    kInferRaw,
                              kInferTyped, kShm,   kShm,    kCancelled, kDeadline};
  for (int w = 0; w < 26; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(::tensorops::testing::TestSeed(1000 + w));
      const Kind kind = w < 24 ? kUnaryKinds[w % 10] : kStream;
      for (int64_t i = 0; !stop.load(); ++i) {
        one_call(kind, rng, w, i);
        ++calls;
        // Calls their client ends take a few ms: paced so they do not crowd
        // out the rest of the mix on 2 cores.
        if (kind == kCancelled || kind == kDeadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    });
  }
  std::vector<Sample> samples;
  const auto start = Clock::now();
  for (int s = 1; s <= seconds; ++s) {
    std::this_thread::sleep_until(start + std::chrono::seconds(s));
    samples.push_back(TakeSample(server, s));
    const Sample& x = samples.back();
    if (s % 10 == 0) {
      std::printf("t=%3ds calls=%lld rss=%lld MiB fds=%d threads=%lld inflight=%.0f (%.0f MiB)\n",
                  s, static_cast<long long>(calls.load()), static_cast<long long>(x.rss_kib >> 10),
                  x.fds, static_cast<long long>(x.threads), x.inflight_requests,
                  x.inflight_bytes / (1 << 20));
      std::fflush(stdout);
    }
  }
  stop = true;
  for (auto& t : workers) t.join();

  // After the load: gauges at 0 and fds back to idle.
  Sample after;
  const auto load_end = Clock::now();
  for (int i = 0; i < 300; ++i) {
    after = TakeSample(server, seconds + i * 0.1);
    if (after.inflight_requests == 0 && after.inflight_bytes == 0 && after.queue_depth == 0 &&
        after.fds <= idle.fds) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  const double settle_s = std::chrono::duration<double>(Clock::now() - load_end).count();
  // Report.
  int64_t total = 0;
  for (const auto& [k, n] : tally.codes) {
    std::printf("%-18s %-18s %lld\n", kKindNames[k.first], k.second.c_str(),
                static_cast<long long>(n));
    total += n;
  }
  for (const std::string& p : tally.problems) std::printf("  problem: %s\n", p.c_str());
  int max_fds = 0;
  int64_t max_threads = 0;
  double max_inflight = 0;
  // RSS swings by what is in flight at that second (two 64-256 MiB
  // uploads, 1-16 MiB calls), so a level is the floor of an interval: its
  // smallest sample. A leak or a creeping heap raises the floors.
  const int interval = 60;
  const std::vector<int64_t> levels = RssLevels(samples, interval);
  std::string level_text;
  for (int64_t v : levels) absl::StrAppend(&level_text, level_text.empty() ? "" : " ", v >> 10);
  // The first minute is warm-up (pools, channels, the heap's first growth).
  const std::vector<int64_t> after_warmup(levels.begin() + std::min<size_t>(levels.size(), 1),
                                          levels.end());
  const double rise = LineRisePercent(after_warmup);
  // A run too short for a line (ctest's 120 s): the floors of the 10 s
  // windows after minute one at most 10% over the floor of seconds 50-60
  // plus the buffer cache's bound (it may fill later).
  const std::vector<int64_t> tens = RssLevels(samples, 10);
  int64_t highest_later = 0;
  for (size_t i = 6; i < tens.size(); ++i) highest_later = std::max(highest_later, tens[i]);
  for (const Sample& x : samples) {
    max_fds = std::max(max_fds, x.fds);
    max_threads = std::max(max_threads, x.threads);
    max_inflight = std::max(max_inflight, x.inflight_requests);
  }
  std::printf(
      "soak %d s: %lld calls; RSS idle %lld MiB; RSS level (floor) per %d s: %s MiB; line "
      "through the levels after the first minute %+.1f%%; "
      "fds idle %d max %d after %d; threads idle %lld max %lld after %lld (%.1f s after the "
      "load); max in flight %.0f\n",
      seconds, static_cast<long long>(total), static_cast<long long>(idle.rss_kib >> 10), interval,
      level_text.c_str(), rise, idle.fds, max_fds, after.fds, static_cast<long long>(idle.threads),
      static_cast<long long>(max_threads), static_cast<long long>(after.threads), settle_s,
      max_inflight);
  if (const char* csv = std::getenv("TENSOROPS_SOAK_CSV")) {
    std::ofstream out(csv);
    out << "t,rss_kib,fds,threads,inflight_requests,inflight_bytes,queue_depth\n";
    for (const Sample& x : samples) {
      out << x.t << "," << x.rss_kib << "," << x.fds << "," << x.threads << ","
          << x.inflight_requests << "," << x.inflight_bytes << "," << x.queue_depth << "\n";
    }
  }

  EXPECT_EQ(tally.wrong.load(), 0);
  EXPECT_EQ(tally.unexpected.load(), 0);
  if (after_warmup.size() >= 3) {
    EXPECT_LE(rise, 10.0) << "RSS levels (MiB): " << level_text;
  } else {
    ASSERT_GE(tens.size(), 6u);
    EXPECT_LE(highest_later, tens[5] * 11 / 10 + (kCacheBytes >> 10));
  }
  EXPECT_EQ(after.inflight_requests, 0);
  EXPECT_EQ(after.inflight_bytes, 0);
  EXPECT_EQ(after.queue_depth, 0);
  EXPECT_LE(after.fds, idle.fds);
  // gRPC 1.51 keeps the threads its pool started for a peak of the load
  // (idle 17, up to 24 under load and still there 55 s after it, in these
  // runs), and a later peak may start a few more: a thread per call or per
  // connection would be thousands here, so idle + 8 is the bound.
  EXPECT_LE(after.threads, idle.threads + 8);
  infer.reset();
  channel.reset();
  client_or->reset();
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace tensorops
