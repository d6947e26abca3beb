// Load driver for the local three-replica test (local_stack_test.sh): calls
// Roll through the load balancer from several threads with the client SDK
// (its default retry policy: UNAVAILABLE is retried, up to 5 attempts; with
// --retries off every call is one attempt, as from a caller that does not
// retry), checks every result against a local computation and counts every
// call's final status.
//
//   load_driver --target 127.0.0.1:PORT [--threads 4] [--marker PATH --marker_after N]
//               [--stop_file PATH --calls_after M] [--max_calls N] [--max_seconds S]
//               [--window_file PATH] [--retries on|off]
//               [--big_every N [--big_min_bytes B] [--big_max_bytes B]]
//
// Runs until --max_calls calls finished, or, with --stop_file, until that file
// exists and --calls_after more calls finished after it appeared. After
// --marker_after successful calls it creates --marker (the test then stops a
// replica while the load goes on). Exit status 0 only if every call ended OK
// with the right result and the run finished within --max_seconds.
//
// With --big_every N, every Nth call (by call id) rolls an INT32 tensor of
// --big_min_bytes..--big_max_bytes (1-4 MiB by default) instead of the 3x8
// one: such requests are larger than the balancer's buffer, so it cannot
// resend them, and their answers span many HTTP/2 DATA frames (issue 36).
// Every failed call is printed with its time and size.
//
// Prints the p50/p99/max latency of all calls (one call = the SDK's Roll,
// retries included) and, with --window_file, of the calls that started inside
// the window that file names ("START END", Unix seconds, written by the test
// before it creates --stop_file): e.g. a replica's restart.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorops/client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  int threads = 4;
  std::string marker;
  int64_t marker_after = 0;
  std::string stop_file;
  int64_t calls_after = 0;
  int64_t max_calls = 1000000;
  double max_seconds = 40;
  int sleep_us = 1000;
  std::string window_file;
  bool retries = true;    // the SDK's RetryPolicy::enabled
  int64_t big_every = 0;  // 0: every call is the small 3x8 Roll
  int64_t big_min_bytes = int64_t{1} << 20;
  int64_t big_max_bytes = int64_t{4} << 20;
};

// One finished call: when it started (Unix seconds) and how long it took.
struct CallTime {
  double start_unix_s;
  double latency_ms;
  bool good;
};

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "N calls (F failed), latency p50 A ms, p99 B ms, max C ms" of `calls`.
std::string Summary(std::vector<CallTime> calls) {
  if (calls.empty()) return "0 calls";
  int64_t failed = 0;
  for (const auto& c : calls) failed += c.good ? 0 : 1;
  std::sort(calls.begin(), calls.end(),
            [](const CallTime& a, const CallTime& b) { return a.latency_ms < b.latency_ms; });
  auto pct = [&](double q) {
    const size_t i =
        std::min(calls.size() - 1, static_cast<size_t>(q * static_cast<double>(calls.size())));
    return calls[i].latency_ms;
  };
  char buf[160];
  std::snprintf(
      buf, sizeof(buf), "%zu calls (%lld failed), latency p50 %.2f ms, p99 %.2f ms, max %.2f ms",
      calls.size(), static_cast<long long>(failed), pct(0.5), pct(0.99), calls.back().latency_ms);
  return buf;
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

int Usage(const char* msg) {
  std::fprintf(stderr, "load_driver: %s\n", msg);
  return 2;
}

constexpr int64_t kRows = 3, kCols = 8;
constexpr int64_t kBigCols = 256;  // 1 KiB rows of INT32

// One call's input: the 3x8 tensor, or with `big` a rows x 256 one of
// min..max bytes (the size drawn from the call id, so a run is repeatable).
struct CallInput {
  std::vector<int32_t> data;
  int64_t rows, cols, s0, s1;
};

CallInput MakeInput(int64_t id, const Options& opt) {
  CallInput in;
  const bool big = opt.big_every > 0 && id % opt.big_every == opt.big_every - 1;
  in.cols = big ? kBigCols : kCols;
  if (big) {
    const int64_t span = std::max<int64_t>(1, opt.big_max_bytes - opt.big_min_bytes + 1);
    const uint64_t h = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull;
    const int64_t bytes = opt.big_min_bytes + static_cast<int64_t>((h >> 20) % span);
    in.rows = std::max<int64_t>(1, bytes / (4 * kBigCols));
  } else {
    in.rows = kRows;
  }
  in.data.resize(in.rows * in.cols);
  for (int64_t k = 0; k < in.rows * in.cols; ++k) in.data[k] = static_cast<int32_t>(id * 100 + k);
  in.s0 = id % in.rows;
  in.s1 = id % in.cols;
  return in;
}

// True if `out` is `in` rolled by (s0, s1) over both axes.
bool RolledRight(const CallInput& in, const tensorops::Tensor& out) {
  if (out.shape() != std::vector<int64_t>{in.rows, in.cols}) return false;
  auto v = out.values<int32_t>();
  if (static_cast<int64_t>(v.size()) != in.rows * in.cols) return false;
  for (int64_t r = 0; r < in.rows; ++r) {
    const int64_t src_row = ((r - in.s0 + in.rows) % in.rows) * in.cols;
    for (int64_t c = 0; c < in.cols; ++c) {
      if (v[r * in.cols + c] != in.data[src_row + (c - in.s1 + in.cols) % in.cols]) return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage(("missing value for " + a).c_str());
    std::string v = argv[++i];
    if (a == "--target")
      opt.target = v;
    else if (a == "--threads")
      opt.threads = std::atoi(v.c_str());
    else if (a == "--marker")
      opt.marker = v;
    else if (a == "--marker_after")
      opt.marker_after = std::atoll(v.c_str());
    else if (a == "--stop_file")
      opt.stop_file = v;
    else if (a == "--calls_after")
      opt.calls_after = std::atoll(v.c_str());
    else if (a == "--max_calls")
      opt.max_calls = std::atoll(v.c_str());
    else if (a == "--max_seconds")
      opt.max_seconds = std::atof(v.c_str());
    else if (a == "--sleep_us")
      opt.sleep_us = std::atoi(v.c_str());
    else if (a == "--window_file")
      opt.window_file = v;
    else if (a == "--retries" && (v == "on" || v == "off"))
      opt.retries = v == "on";
    else if (a == "--big_every")
      opt.big_every = std::atoll(v.c_str());
    else if (a == "--big_min_bytes")
      opt.big_min_bytes = std::atoll(v.c_str());
    else if (a == "--big_max_bytes")
      opt.big_max_bytes = std::atoll(v.c_str());
    else
      return Usage(("unknown flag " + a).c_str());
  }
  if (opt.target.empty() || opt.threads < 1) return Usage("--target is required");

  tensorops::ClientOptions co;
  co.target = opt.target;
  co.default_deadline = std::chrono::seconds(10);
  co.retry.enabled = opt.retries;
  auto client = tensorops::Client::Create(co);
  if (!client.ok()) {
    std::fprintf(stderr, "load_driver: %s\n", client.status().ToString().c_str());
    return 1;
  }

  const auto start = Clock::now();
  const auto limit = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(opt.max_seconds));
  std::atomic<int64_t> next_id{0}, finished{0}, ok{0}, wrong{0};
  std::atomic<bool> marker_written{false}, stop_seen{false}, timed_out{false};
  std::atomic<int64_t> finished_at_stop{-1};
  std::mutex mu;
  std::map<std::string, int64_t> codes;  // final status code -> count
  std::string first_error;
  std::vector<CallTime> times;

  auto done = [&]() {
    int64_t f = finished.load();
    if (f >= opt.max_calls) return true;
    if (!opt.stop_file.empty()) {
      if (!stop_seen.load() && FileExists(opt.stop_file)) {
        int64_t expected = -1;
        finished_at_stop.compare_exchange_strong(expected, f);
        stop_seen = true;
      }
      if (stop_seen.load() && f - finished_at_stop.load() >= opt.calls_after) return true;
    }
    if (Clock::now() > limit) {
      timed_out = true;
      return true;
    }
    return false;
  };

  auto worker = [&]() {
    while (!done()) {
      const int64_t id = next_id.fetch_add(1);
      const CallInput in = MakeInput(id, opt);
      const double call_start = UnixSeconds();
      const auto t0 = Clock::now();
      auto out = (*client)->Roll(tensorops::Tensor(in.data, {in.rows, in.cols}),
                                 tensorops::Tensor(std::vector<int64_t>{in.s0, in.s1}),
                                 tensorops::Tensor(std::vector<int64_t>{0, 1}));
      const double latency_ms =
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      bool good = out.ok();
      std::string code = out.ok() ? "OK" : absl::StatusCodeToString(out.status().code());
      if (good) {
        good = RolledRight(in, *out);
        if (!good) {
          code = "WRONG_RESULT";
          ++wrong;
        }
      }
      if (!good) {
        std::fprintf(stderr, "load_driver: call %lld at %.3f (+%.3f s), %lld bytes: %s\n",
                     static_cast<long long>(id), call_start,
                     std::chrono::duration<double>(t0 - start).count(),
                     static_cast<long long>(in.data.size() * 4),
                     out.ok() ? "wrong result" : out.status().ToString().c_str());
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ++codes[code];
        times.push_back({call_start, latency_ms, good});
        if (!good && first_error.empty()) {
          first_error = out.ok() ? "call " + std::to_string(id) + ": wrong result"
                                 : "call " + std::to_string(id) + ": " + out.status().ToString();
        }
      }
      if (good && ++ok >= opt.marker_after && !opt.marker.empty() &&
          !marker_written.exchange(true)) {
        std::ofstream(opt.marker) << ok.load() << "\n";
      }
      ++finished;
      if (opt.sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opt.sleep_us));
    }
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < opt.threads; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();

  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t total = finished.load();
  std::printf("load_driver: %lld calls in %.1f s (SDK retries %s), %lld OK and verified",
              static_cast<long long>(total), secs, opt.retries ? "on" : "off",
              static_cast<long long>(ok.load()));
  if (finished_at_stop.load() >= 0) {
    std::printf(", %lld after the stop", static_cast<long long>(total - finished_at_stop.load()));
  }
  std::printf("; final status:");
  for (const auto& [code, n] : codes)
    std::printf(" %s=%lld", code.c_str(), static_cast<long long>(n));
  std::printf("\n");
  std::printf("load_driver: all: %s\n", Summary(times).c_str());
  if (!opt.window_file.empty()) {
    double w0 = 0, w1 = 0;
    std::ifstream wf(opt.window_file);
    if (wf >> w0 >> w1) {
      std::vector<CallTime> in;
      for (const auto& c : times) {
        if (c.start_unix_s >= w0 && c.start_unix_s <= w1) in.push_back(c);
      }
      std::printf("load_driver: window %.1f s: %s\n", w1 - w0, Summary(in).c_str());
    } else {
      std::printf("load_driver: no window in %s\n", opt.window_file.c_str());
    }
  }
  bool pass = total > 0 && ok.load() == total;
  if (!first_error.empty()) std::printf("load_driver: first failure: %s\n", first_error.c_str());
  if (timed_out) {
    std::printf("load_driver: stopped by --max_seconds %.0f before its goal\n", opt.max_seconds);
    pass = false;
  }
  return pass ? 0 : 1;
}
