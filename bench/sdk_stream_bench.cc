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
// First call against warm ones (issue 44: a fresh server's first streamed
// call): each line also carries the call's page faults in this process
// (getrusage) and, with --server_pid (the server on this machine), the
// server's page faults and CPU seconds over the call (/proc/PID/stat). Those
// do not depend on the machine's load as wall-clock seconds do. With
// --server_pid and two calls or more, a last line "first_vs_warm" gives the
// first call's figures over the warm calls' medians. Started against a fresh server, it compares
// a fresh server's first call with its warm ones.
//
// The process runs with tensorops::TuneMallocForBigTensors() (the SDK's
// advice for a process that moves big tensors; the echo's load_tool runs
// with the same malloc settings) unless --malloc_tuning=false, which shows
// what a caller who skips it pays.
//
// Usage: sdk_stream_bench --address=127.0.0.1:PORT [--tensor_bytes=1073741824]
//                         [--calls=3] [--flow=true] [--server_pid=PID]
//                         [--malloc_tuning=true]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
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
ABSL_FLAG(bool, malloc_tuning, true, "call tensorops::TuneMallocForBigTensors() first");
ABSL_FLAG(bool, channel_per_call, false,
          "a new Client (its own channel and connection) for each call: the first call's "
          "connection cost in every call");
ABSL_FLAG(int64_t, server_pid, 0,
          "the server's process id (on this machine): its page faults and CPU seconds per call");

namespace {

// Page faults and CPU seconds of a process, counted since it started.
struct Counters {
  int64_t faults = 0;
  double cpu_seconds = 0;
};

Counters Self() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_minflt + u.ru_majflt,
          static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
              1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec)};
}

// /proc/PID/stat: minflt (10th field), majflt (12th), utime (14th), stime
// (15th), counted from the field after the command's closing parenthesis.
Counters OfProcess(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(stat.substr(close + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                             std::istream_iterator<std::string>());
  if (f.size() < 13) return {};
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {std::stoll(f[7]) + std::stoll(f[9]), (std::stod(f[11]) + std::stod(f[12])) / tick};
}

struct CallFigures {
  double seconds = 0;
  Counters client, server;  // over the call
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The first call's figures over the warm calls' medians.
void PrintFirstVsWarm(const std::vector<CallFigures>& calls) {
  std::vector<double> s, cf, sf, sc;
  for (size_t i = 1; i < calls.size(); ++i) {
    s.push_back(calls[i].seconds);
    cf.push_back(static_cast<double>(calls[i].client.faults));
    sf.push_back(static_cast<double>(calls[i].server.faults));
    sc.push_back(calls[i].server.cpu_seconds);
  }
  auto ratio = [](double first, double warm) { return warm > 0 ? first / warm : 0.0; };
  const CallFigures& f = calls[0];
  std::printf(
      "{\"mode\":\"first_vs_warm\",\"seconds\":%.3f,\"client_page_faults\":%.3f,"
      "\"server_page_faults\":%.3f,\"server_cpu_seconds\":%.3f,\"first_server_page_faults\":%lld,"
      "\"warm_server_page_faults\":%.0f}\n",
      ratio(f.seconds, Median(s)), ratio(static_cast<double>(f.client.faults), Median(cf)),
      ratio(static_cast<double>(f.server.faults), Median(sf)),
      ratio(f.server.cpu_seconds, Median(sc)), static_cast<long long>(f.server.faults), Median(sf));
}

// Empty when `out` is the input rolled by `shift` (every 4093rd byte and
// the last), else what is wrong.
std::string Check(const absl::StatusOr<tensorops::Tensor>& out, const uint8_t* input, int64_t bytes,
                  int64_t shift) {
  if (!out.ok()) return out.status().ToString();
  if (out->bytes().size() != static_cast<size_t>(bytes)) return "output size differs";
  const auto* o = reinterpret_cast<const uint8_t*>(out->bytes().data());
  bool same = o[(bytes - 1 + shift) % bytes] == input[bytes - 1];
  for (int64_t i = 0; i < bytes; i += 4093) {
    if (o[(i + shift) % bytes] != input[i]) same = false;
  }
  return same ? "" : "output differs from the input rolled";
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sdk_stream_bench --address=HOST:PORT [--tensor_bytes=N] [--calls=3] [--flow=true]");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_malloc_tuning)) tensorops::TuneMallocForBigTensors();
  const std::string address = absl::GetFlag(FLAGS_address);
  const int64_t bytes = absl::GetFlag(FLAGS_tensor_bytes);
  const int calls = absl::GetFlag(FLAGS_calls);
  const bool flow = absl::GetFlag(FLAGS_flow);
  const int64_t server_pid = absl::GetFlag(FLAGS_server_pid);
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
  std::vector<CallFigures> figures;
  for (int c = 0; c < calls; ++c) {
    const Counters client0 = Self();
    const Counters server0 = server_pid > 0 ? OfProcess(server_pid) : Counters{};
    const auto start = std::chrono::steady_clock::now();
    if (c > 0 && absl::GetFlag(FLAGS_channel_per_call)) {
      client = tensorops::Client::Create(options);
      if (!client.ok()) {
        std::fprintf(stderr, "sdk_stream_bench: %s\n", client.status().ToString().c_str());
        return 1;
      }
    }
    absl::StatusOr<tensorops::Tensor> out = (*client)->Roll(data, shift_t, axes_t, call);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Counters client1 = Self();
    const Counters server1 = server_pid > 0 ? OfProcess(server_pid) : Counters{};
    CallFigures fig;
    fig.seconds = seconds;
    fig.client = {client1.faults - client0.faults, client1.cpu_seconds - client0.cpu_seconds};
    fig.server = {server1.faults - server0.faults, server1.cpu_seconds - server0.cpu_seconds};
    figures.push_back(fig);
    std::string error = Check(out, input.get(), bytes, shift);
    const bool verified = error.empty();
    for (char& ch : error) {
      if (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20) ch = '\'';
    }
    std::printf(
        "{\"mode\":\"sdk_stream\",\"op\":\"roll_uint8%s\",\"tensor_bytes\":%lld,\"call\":%d,"
        "\"seconds\":%.4f,\"gb_per_s\":%.3f,\"client_page_faults\":%lld,"
        "\"client_cpu_seconds\":%.3f,"
        "\"server_page_faults\":%lld,\"server_cpu_seconds\":%.3f,\"verified\":%s,"
        "\"error\":\"%s\"}\n",
        flow ? "_flow" : "", static_cast<long long>(bytes), c, seconds,
        seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0,
        static_cast<long long>(fig.client.faults), fig.client.cpu_seconds,
        static_cast<long long>(fig.server.faults), fig.server.cpu_seconds,
        verified ? "true" : "false", error.c_str());
    std::fflush(stdout);
    if (!verified) return 1;
  }
  if (server_pid > 0 && calls >= 2) PrintFirstVsWarm(figures);
  return 0;
}
