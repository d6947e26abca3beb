// Holds a test server's kernel pool while the gate is shut: the server runs
// with --test_only_kernel_gate=<file> (server/test_only_flags.cc), and every
// kernel task waits after leaving the queue while the file exists. The test,
// not a big kernel racing a deadline on a loaded machine, decides when
// kernels run.
//
// Example:
//   KernelGate gate;  // shut
//   auto server = StartServer({gate.Flag()});
//   ... send a call that must wait ...
//   gate.Open();
//
// Thread-safety: Open may be called from any thread, more than once.
#ifndef TENSOROPS_TESTS_HARNESS_KERNEL_GATE_H_
#define TENSOROPS_TESTS_HARNESS_KERNEL_GATE_H_

#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace tensorops::testing {

class KernelGate {
 public:
  // Shut: creates the gate file.
  KernelGate() {
    char path[] = "/tmp/tensorops_kernel_gate.XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    path_ = fd >= 0 ? path : "";
  }
  ~KernelGate() { Open(); }
  KernelGate(const KernelGate&) = delete;
  KernelGate& operator=(const KernelGate&) = delete;

  // False if the gate file could not be made (the gate would be open).
  bool shut_ok() const { return !path_.empty(); }
  std::string Flag() const { return "--test_only_kernel_gate=" + path_; }
  void Open() {
    if (!path_.empty()) unlink(path_.c_str());
  }

 private:
  std::string path_;
};

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_KERNEL_GATE_H_
