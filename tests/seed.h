// The seed of a random test. A plain run draws from the fixed seed written in
// the test, so it is the same every time; TENSOROPS_TEST_SEED=<n> mixes <n>
// into every generator of the test binary (each keeps its own stream), so a
// test can be swept over many seeds and a failure replayed:
//   for s in $(seq 1 300); do TENSOROPS_TEST_SEED=$s ./kernels_roll_test || break; done
// The first seed a process draws prints the variable's value on stderr
// ("unset": the fixed seeds), so every log says how to replay it.
// Thread-safe.
#ifndef TENSOROPS_TESTS_SEED_H_
#define TENSOROPS_TESTS_SEED_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace tensorops::testing {

// `fixed` when TENSOROPS_TEST_SEED is unset or empty, else a SplitMix64 of
// the two (different fixed seeds stay different streams).
inline uint64_t TestSeed(uint64_t fixed) {
  static const char* const env = [] {
    const char* v = std::getenv("TENSOROPS_TEST_SEED");
    if (v != nullptr && *v == '\0') v = nullptr;
    std::fprintf(stderr, "random seeds: TENSOROPS_TEST_SEED=%s\n", v ? v : "unset");
    return v;
  }();
  if (env == nullptr) return fixed;
  uint64_t x = std::strtoull(env, nullptr, 0) ^ (fixed * 0xD1B54A32D192ED03ull);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_SEED_H_
