// What every fuzz target here shares: the registry of built-in ops, the
// report of a violated property, and silencing protobuf's parse-error logs.
#ifndef TENSOROPS_FUZZ_FUZZ_UTIL_H_
#define TENSOROPS_FUZZ_FUZZ_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "kernels/op_registry.h"

namespace tensorops::fuzz {

// The built-in ops, registered once (never destroyed: LeakSanitizer does
// not count objects reachable from a static).
inline const OpRegistry& Registry() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterBuiltinOps(r);
    return r;
  }();
  return *registry;
}

// A finding: the target's name and the property, then abort (libFuzzer
// saves the input).
[[noreturn]] inline void PropertyViolated(const char* target, const char* what) {
  std::fprintf(stderr, "%s: property violated: %s\n", target, what);
  std::abort();
}

// Invalid UTF-8 in string fields is a parse failure; don't log each one.
inline void QuietProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
}

}  // namespace tensorops::fuzz

#endif  // TENSOROPS_FUZZ_FUZZ_UTIL_H_
