// Raw tensor bytes as the wire carries them, for tests that build requests
// by hand: a vector's elements packed (this machine's order: little-endian
// on every target we build), and BYTES/STRING elements as the Open Inference
// Protocol's raw form (a 4-byte little-endian length before each element).
//
// Example:
//   request.add_raw_input_contents(Pack<int64_t>({0, 2}));
//   request.add_raw_input_contents(RawStrings({"a", "bc"}));
#ifndef TENSOROPS_TESTS_HARNESS_RAW_BYTES_H_
#define TENSOROPS_TESTS_HARNESS_RAW_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tensorops::testing {

template <typename T>
std::string Pack(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(&out[0], values.data(), out.size());
  return out;
}

inline std::string RawStrings(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    const uint32_t len = static_cast<uint32_t>(v.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += v;
  }
  return out;
}

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_RAW_BYTES_H_
