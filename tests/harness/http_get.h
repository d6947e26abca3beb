// Test helpers for the Prometheus /metrics endpoint: a minimal HTTP/1.0 GET
// over a POSIX socket to 127.0.0.1, and an exact sample lookup in the
// Prometheus text exposition format. Used by the metrics unit test and the
// end-to-end tests.
//
// Code inside namespace tensorops must spell GoogleTest's namespace
// ::testing, as tests/harness/server_process.h also lives here.
//
// Thread-safety: both functions are free of shared state and safe to call
// from any thread.
#ifndef TENSOROPS_TESTS_HARNESS_HTTP_GET_H_
#define TENSOROPS_TESTS_HARNESS_HTTP_GET_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace tensorops::testing {

// GETs `path` from 127.0.0.1:`port` with HTTP/1.0 and returns the body of a
// 200 response. Any other status, a chunked or truncated body, or no complete
// answer within `timeout_ms` (connect + send + receive together) is an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path, int timeout_ms = 10000);

// Finds the one sample `name{labels} value` in a text-format `body` whose
// label set equals `labels` exactly (order-insensitive; an empty map matches
// an unlabelled sample only) and returns its value. For the "le" label the
// values also match when both parse to the same number ("5e-6" == "5e-06").
// NotFound if no sample matches, FailedPrecondition if several do.
absl::StatusOr<double> FindSample(const std::string& body, const std::string& name,
                                  const std::map<std::string, std::string>& labels);

// GETs /metrics from 127.0.0.1:`metrics_port` and returns the sample
// FindSample finds, or -1 if the scrape fails or no single sample matches
// (every tensorops sample is >= 0, so -1 never passes for a real value).
double ScrapeSample(int metrics_port, const std::string& name,
                    const std::map<std::string, std::string>& labels = {});

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_HTTP_GET_H_
