// The Open Inference Protocol's shared-memory path against its inline path,
// and against the kernel's own time (BENCHMARKS.md "Open Inference Protocol").
//
//   oip_bench ADDRESS [--mib=16] [--seconds=5] [--kernel] [--shm_only]
//
// Sends Roll calls (FP32 data of --mib MiB, shape [64, rows, 256] rolled by 3
// along axis 1) to a running tensorops-server (--shared_memory=system) one
// after another (concurrency 1) for --seconds per mode:
//   inline  data in raw_input_contents, result in raw_output_contents;
//   shm     data and result in one POSIX shared-memory object registered once.
// Every reply is checked (first and last row of the result). Prints calls/s
// and mean milliseconds per call for each mode and their ratio. With
// --kernel, also times the same Roll in this process (registry + a 2-thread
// pool, warm output buffer, the server's --min_parallel_bytes default) and
// prints the end-to-end shm time over it.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Result {
  int64_t calls = 0;
  double seconds = 0;
};

void AddIndexInputs(ModelInferRequest* r) {
  for (const char* name : {"shift", "axes"}) {
    auto* t = r->add_inputs();
    t->set_name(name);
    t->set_datatype("INT64");
    t->add_shape(1);
    t->mutable_contents()->add_int64_contents(name[0] == 's' ? 3 : 1);
  }
}

void UseRegion(google::protobuf::Map<std::string, inference::InferParameter>* p, int64_t offset,
               int64_t size) {
  (*p)["shared_memory_region"].set_string_param("bench");
  (*p)["shared_memory_offset"].set_int64_param(offset);
  (*p)["shared_memory_byte_size"].set_int64_param(size);
}

bool Check(const float* out, int64_t rows, int64_t cols) {
  // Roll by 3 along axis 1 of [64, rows, cols]: row 0 of the result is input row rows-3.
  return out[0] == static_cast<float>((rows - 3) * cols) &&
         out[cols] == static_cast<float>((rows - 2) * cols);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: oip_bench ADDRESS [--mib=16] [--seconds=5] [--kernel] [--shm_only]\n");
    return 2;
  }
  const std::string address = argv[1];
  int64_t mib = 16;
  double seconds = 5;
  bool kernel = false;
  bool shm_only = false;  // skip the inline mode (slow at 256 MiB)
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--mib=", 0) == 0) mib = std::stoll(a.substr(6));
    if (a.rfind("--seconds=", 0) == 0) seconds = std::stod(a.substr(10));
    if (a == "--kernel") kernel = true;
    if (a == "--shm_only") shm_only = true;
  }
  const int64_t bytes = mib << 20;
  const int64_t n = bytes / 4;
  const int64_t cols = 256, rows = n / 64 / cols;
  std::vector<float> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % (rows * cols));

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));

  auto run = [&](const ModelInferRequest& request, const float* shm_out, const char* mode) {
    Result r;
    const Clock::time_point start = Clock::now();
    do {
      grpc::ClientContext ctx;
      ModelInferResponse response;
      const grpc::Status st = stub->ModelInfer(&ctx, request, &response);
      if (!st.ok()) {
        std::fprintf(stderr, "%s: %s\n", mode, st.error_message().c_str());
        std::exit(1);
      }
      const float* out =
          shm_out != nullptr
              ? shm_out
              : reinterpret_cast<const float*>(response.raw_output_contents(0).data());
      if (!Check(out, rows, cols)) {
        std::fprintf(stderr, "%s: wrong result\n", mode);
        std::exit(1);
      }
      ++r.calls;
    } while (Seconds(Clock::now() - start) < seconds);
    r.seconds = Seconds(Clock::now() - start);
    std::printf("%-7s %4lld MiB  %8.1f calls/s  %9.3f ms/call  (%lld calls)\n", mode,
                static_cast<long long>(mib), r.calls / r.seconds, 1e3 * r.seconds / r.calls,
                static_cast<long long>(r.calls));
    return r;
  };

  ModelInferRequest base;
  base.set_model_name("Roll");
  auto* d = base.add_inputs();
  d->set_name("data");
  d->set_datatype("FP32");
  for (int64_t s : {int64_t{64}, rows, cols}) d->add_shape(s);
  AddIndexInputs(&base);

  // Inline: the tensor travels in the messages.
  ModelInferRequest inline_request = base;
  for (auto& t : *inline_request.mutable_inputs()) {
    if (t.name() == "data") continue;
    t.clear_contents();
  }
  inline_request.add_raw_input_contents(reinterpret_cast<const char*>(data.data()), bytes);
  for (const char* name : {"shift", "axes"}) {
    const int64_t v = name[0] == 's' ? 3 : 1;
    inline_request.add_raw_input_contents(reinterpret_cast<const char*>(&v), 8);
  }
  Result in = {};
  if (!shm_only) in = run(inline_request, nullptr, "inline");

  // Shared memory: one object for input and output.
  const std::string key = "/tensorops-oip-bench-" + std::to_string(getpid());
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, 2 * bytes) != 0) {
    std::perror("shm");
    return 1;
  }
  char* map =
      static_cast<char*>(mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::memcpy(map, data.data(), bytes);
  {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryRegisterRequest reg;
    reg.set_name("bench");
    reg.set_key(key);
    reg.set_byte_size(2 * bytes);
    inference::SystemSharedMemoryRegisterResponse out;
    const grpc::Status st = stub->SystemSharedMemoryRegister(&ctx, reg, &out);
    if (!st.ok()) {
      std::fprintf(stderr, "register: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  ModelInferRequest shm_request = base;
  UseRegion(shm_request.mutable_inputs(0)->mutable_parameters(), 0, bytes);
  auto* o = shm_request.add_outputs();
  o->set_name("output");
  UseRegion(o->mutable_parameters(), bytes, bytes);
  const Result sh = run(shm_request, reinterpret_cast<const float*>(map + bytes), "shm");
  if (in.calls > 0) {
    std::printf("shm / inline calls/s: %.2fx\n", (sh.calls / sh.seconds) / (in.calls / in.seconds));
  }
  {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterRequest u;
    inference::SystemSharedMemoryUnregisterResponse out;
    stub->SystemSharedMemoryUnregister(&ctx, u, &out);
  }

  if (kernel) {
    // The kernel alone on the same tensor, as the server runs it (2-thread
    // pool, split from 1 MiB), into a warm buffer.
    tensorops::OpRegistry registry;
    tensorops::RegisterBuiltinOps(&registry);
    tensorops::ThreadPool pool(2);
    const int64_t shift = 3, axis = 1;
    tensorops::TensorView views[3];
    views[0] = {tensorops::DType::kFloat32, {64, rows, cols}, data.data()};
    views[1] = {tensorops::DType::kInt64, {}, &shift};
    views[2] = {tensorops::DType::kInt64, {}, &axis};
    auto op = registry.Prepare("Roll", views, {});
    if (!op.ok()) return 1;
    std::vector<float> out(static_cast<size_t>(n));
    tensorops::RunPrepared(*op, out.data(), &pool);  // warm
    int64_t runs = 0;
    const Clock::time_point start = Clock::now();
    do {
      tensorops::RunPrepared(*op, out.data(), &pool);
      ++runs;
    } while (Seconds(Clock::now() - start) < seconds);
    const double per = Seconds(Clock::now() - start) / runs;
    std::printf("kernel  %4lld MiB  %9.3f ms/run (in process, 2 threads)\n",
                static_cast<long long>(mib), 1e3 * per);
    std::printf("shm end-to-end / kernel: %.2fx\n", (sh.seconds / sh.calls) / per);
  }
  munmap(map, 2 * bytes);
  close(fd);
  shm_unlink(key.c_str());
  return 0;
}
