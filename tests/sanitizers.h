// Which sanitizer a test binary is built with, for the few checks whose
// premise a sanitizer breaks: resident memory (ASan's quarantine and TSan's
// shadow keep freed memory) and millisecond timings (both slow everything
// down 5-15x). Everything else runs the same under every build.
#ifndef TENSOROPS_TESTS_SANITIZERS_H_
#define TENSOROPS_TESTS_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TENSOROPS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TENSOROPS_TEST_SANITIZED 1
#endif
#endif

namespace tensorops::testing {
#ifdef TENSOROPS_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_SANITIZERS_H_
