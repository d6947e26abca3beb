// The instruction set the kernels' own loops run on, chosen once per process,
// and the one dispatch every kernel with per-ISA variants goes through.
//
// A kernel with variants is written once, as a class template body
// parameterised on an ISA tag (ScalarIsa, Sse2Isa, Avx2Isa below), and
// dispatched with IsaDispatch:
//
//   struct CopyRows {  // the kernel: one static Run per tag
//     template <typename Isa>
//     static void Run(const RowArgs& a) { ... Isa::Line::Copy(d, s) ... }
//   };
//   IsaDispatch<CopyRows>::Run(args);        // on the active level
//   IsaDispatch<CopyRows>::Get<RowArgs>()    // its function pointer, once
//
// IsaDispatch instantiates Run<Tag> inside one wrapper per level, the AVX2
// one compiled with `__attribute__((target("avx2"), flatten))` so that the
// level's inline helpers (Avx2Line::Copy, the lane reversals) are inlined
// into it: GCC refuses to inline a target("avx2") function into a baseline
// one, and a call per 64-byte line costs more than the line.
//
// Thread-safety: detection runs once (a function-local static); the override
// (SetKernelIsa) is atomic and meant for tests and benchmarks: set it before
// running the kernels that should see it.
#ifndef TENSOROPS_KERNELS_KERNEL_ISA_H_
#define TENSOROPS_KERNELS_KERNEL_ISA_H_

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tensorops {

// The levels of the kernels' own loops. Every level writes the same bytes;
// they differ only in the instructions that move them:
//   kAvx2:   32-byte loads, lane shuffles and streaming stores.
//   kSse2:   16-byte ones (baseline x86-64: every x86-64 CPU has it).
//   kScalar: general-purpose registers only; on x86-64 the streaming stores
//            are 8-byte `movnti`, elsewhere plain stores.
// The kernels copy rows with these loops, not with glibc's memcpy: which
// memcpy variant glibc picks (and whether its short-size path streams)
// depends on the CPU, and a kernel that calls it once per 256-byte row ran at
// 0.48x memcpy on an AVX-512 Xeon and at memcpy speed on an EPYC (issue 38).
// There is no AVX-512 level: no machine we test on can execute it (neither
// the CI's EPYC nor an emulator in Debian 12), so such loops would ship
// untested; the CPU's AVX-512 is detected and reported (CpuInfo) only.
enum class KernelIsa { kScalar, kSse2, kAvx2 };
inline constexpr int kKernelIsaCount = 3;

// What the CPU has, read once (CPUID through libgcc) and the model name from
// /proc/cpuinfo (empty where there is none).
struct CpuInfo {
  std::string model;
  bool sse2 = false, ssse3 = false, avx2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vbmi = false;
};
const CpuInfo& DetectedCpu();
// One line for logs and benchmark output: the model, the flags above the CPU
// has, the level chosen and why, e.g.
//   "AMD EPYC; flags sse2 ssse3 avx2; kernels on avx2 (CPU best avx2)"
// with ", AVX-512 present but not used (no avx512 level built)" when it has.
std::string KernelIsaReport();

// The best level this CPU has, capped by TENSOROPS_KERNEL_ISA (avx2, sse2 or
// scalar; read once, at the first call) or by SetKernelIsa. A level the CPU
// lacks falls back to the best one it has, with one line on stderr.
KernelIsa ActiveKernelIsa();
// Overrides the level for tests and benchmarks (capped at what the CPU has);
// nullopt restores the one chosen at start-up.
void SetKernelIsa(std::optional<KernelIsa> isa);
// The best level this CPU supports.
KernelIsa CpuKernelIsa();
// Whether this CPU can run the level (a test skips the variants it cannot).
inline bool CpuHasKernelIsa(KernelIsa isa) { return isa <= CpuKernelIsa(); }
// "avx2", "sse2", "scalar".
const char* KernelIsaName(KernelIsa isa);
// Parses a name as KernelIsaName prints it; nullopt for anything else.
std::optional<KernelIsa> ParseKernelIsa(std::string_view name);

// The ISA tags a kernel body is instantiated with: each names its level;
// the kernel's own headers map a tag to their per-level helpers with ByIsa
// (e.g. streaming_store.h's LineOf<Isa>, lane_reverse.h's RevOf<Isa>).
struct ScalarIsa {
  static constexpr KernelIsa kIsa = KernelIsa::kScalar;
};
struct Sse2Isa {
  static constexpr KernelIsa kIsa = KernelIsa::kSse2;
};
struct Avx2Isa {
  static constexpr KernelIsa kIsa = KernelIsa::kAvx2;
};

// The helper of an ISA tag's level among a kernel's three (e.g.
// streaming_store.h: LineOf<Isa> = ByIsa<Isa, ScalarLine, Sse2Line, Avx2Line>).
template <typename Isa, typename Scalar, typename Sse2, typename Avx2>
using ByIsa = std::conditional_t<Isa::kIsa == KernelIsa::kScalar, Scalar,
                                 std::conditional_t<Isa::kIsa == KernelIsa::kSse2, Sse2, Avx2>>;

// One kernel's per-level variants and the choice between them. `Kernel` has
// `template <typename Isa, typename... Args> static R Run(Args...)`; the
// variants are the three wrappers below, the table of them is a constant,
// and the level is resolved once per process (ActiveKernelIsa), so a call
// costs one relaxed atomic load and an indirect call. Hot loops take the
// pointer once (Get) and call it per batch of rows, never per row.
// Off x86-64 only the scalar level exists and Run calls it directly.
template <typename Kernel>
struct IsaDispatch {
  template <typename... Args>
  using Fn = void (*)(Args...);

  template <typename... Args>
  __attribute__((flatten)) static void Scalar(Args... args) {
    Kernel::template Run<ScalarIsa>(args...);
  }
#if defined(__x86_64__)
  template <typename... Args>
  __attribute__((flatten)) static void Sse2(Args... args) {
    Kernel::template Run<Sse2Isa>(args...);
  }
  template <typename... Args>
  __attribute__((target("avx2"), flatten)) static void Avx2(Args... args) {
    Kernel::template Run<Avx2Isa>(args...);
  }
#endif

  // The variant for `isa` (which the CPU must have).
  template <typename... Args>
  static Fn<Args...> On(KernelIsa isa) {
#if defined(__x86_64__)
    static constexpr Fn<Args...> kVariants[kKernelIsaCount] = {&Scalar<Args...>, &Sse2<Args...>,
                                                               &Avx2<Args...>};
    return kVariants[static_cast<int>(isa)];
#else
    (void)isa;
    return &Scalar<Args...>;
#endif
  }
  // The variant for the active level.
  template <typename... Args>
  static Fn<Args...> Get() {
    return On<Args...>(ActiveKernelIsa());
  }
  template <typename... Args>
  static void Run(Args... args) {
    Get<Args...>()(args...);
  }
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_KERNEL_ISA_H_
