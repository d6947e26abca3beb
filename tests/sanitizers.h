// Which sanitizer a test binary is built with, for the few checks whose
// premise a sanitizer breaks: resident memory (ASan's quarantine and TSan's
// shadow keep freed memory) and millisecond timings (both slow everything
// down 5-15x). Everything else runs the same under every build.
#ifndef TENSOROPS_TESTS_SANITIZERS_H_
#define TENSOROPS_TESTS_SANITIZERS_H_

#if defined(__SANITIZE_THREAD__)
#define TENSOROPS_TEST_THREAD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENSOROPS_TEST_THREAD_SANITIZED 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(TENSOROPS_TEST_THREAD_SANITIZED)
#define TENSOROPS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENSOROPS_TEST_SANITIZED 1
#endif
#endif

namespace tensorops::testing {
#ifdef TENSOROPS_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// TSan instruments every load and store of the kernels: a 128 MiB Roll takes
// ~15 s there (0.1 s in the plain build), so tests that need a kernel "busy
// for a while" size it by build.
#ifdef TENSOROPS_TEST_THREAD_SANITIZED
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_SANITIZERS_H_
