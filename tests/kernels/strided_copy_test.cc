// ReverseBlocks across every width and lengths around the vector sizes (the
// AVX2 path handles 2 x 32 bytes per step, the scalar loop the tail).
#include "kernels/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/streaming_store.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

TEST(ReverseBlocksTest, MatchesBlockByBlockReversal) {
  std::mt19937 rng(::tensorops::testing::TestSeed(7));
  for (int64_t block : {1, 2, 3, 4, 8, 12, 16, 24}) {
    for (int64_t n = 0; n <= 300; ++n) {
      SCOPED_TRACE(::testing::Message() << "block " << block << " n " << n);
      // Offset by one byte: buffers need not be aligned.
      std::vector<char> src(n * block + 1), dst(n * block + 1 + 8, 0x5A);
      for (char& c : src) c = static_cast<char>(rng());
      ReverseBlocks(dst.data() + 1, src.data() + 1, n, block);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(
            std::memcmp(dst.data() + 1 + i * block, src.data() + 1 + (n - 1 - i) * block, block), 0)
            << "block index " << i;
      }
      // Nothing written outside [1, 1 + n*block).
      EXPECT_EQ(dst[0], 0x5A);
      for (int64_t i = 1 + n * block; i < static_cast<int64_t>(dst.size()); ++i) {
        ASSERT_EQ(dst[i], 0x5A);
      }
    }
  }
}

// ReverseRows walks rows with any byte steps, also negative ones (a reversed
// outer dim) and steps larger than a row (rows of a bigger tensor).
TEST(ReverseBlocksTest, ReverseRowsWithSteps) {
  std::mt19937 rng(::tensorops::testing::TestSeed(11));
  for (int64_t block : {1, 2, 4, 8, 16, 3}) {
    for (int64_t n : {1, 5, 31, 32, 33, 64, 100, 256}) {
      SCOPED_TRACE(::testing::Message() << "block " << block << " n " << n);
      const int64_t rows = 4, row = n * block, gap = 7;
      std::vector<char> src(rows * (row + gap)), dst(rows * (row + gap), 0x5A);
      for (char& c : src) c = static_cast<char>(rng());
      // Rows read last to first, written first to last, gap bytes apart.
      ReverseRows(dst.data(), src.data() + (rows - 1) * (row + gap), n, block, rows, row + gap,
                  -(row + gap));
      for (int64_t r = 0; r < rows; ++r) {
        const char* s = src.data() + (rows - 1 - r) * (row + gap);
        const char* d = dst.data() + r * (row + gap);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(std::memcmp(d + i * block, s + (n - 1 - i) * block, block), 0)
              << "row " << r << " block " << i;
        }
        for (int64_t g = 0; g < gap; ++g) ASSERT_EQ(d[row + g], 0x5A);
      }
    }
  }
}

// Every store path of ReverseBlocks/ReverseRows: ordinary or streaming
// stores, on each instruction set; destination offsets 0-63 bytes from a 64-byte
// boundary so the streaming path's aligned middle and unaligned ends (and its
// fallback for a destination not aligned to the element) are all hit.
TEST(ReverseBlocksTest, StoreModesAndAlignments) {
  std::mt19937 rng(::tensorops::testing::TestSeed(13));
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kSse2, KernelIsa::kScalar}) {
    SetKernelIsa(isa);
    for (bool stream : {false, true}) {
      for (int64_t block : {1, 2, 4, 8, 16, 24, 256}) {
        for (int64_t n : {0, 1, 7, 16, 31, 32, 33, 63, 64, 65, 100, 257}) {
          for (int64_t offset : {0, 1, 2, 4, 8, 16, 24, 32, 40, 63}) {
            SCOPED_TRACE(::testing::Message()
                         << KernelIsaName(isa) << " stream " << stream << " block " << block
                         << " n " << n << " offset " << offset);
            const int64_t bytes = n * block;
            std::vector<char> src(bytes + 3);
            for (char& c : src) c = static_cast<char>(rng());
            // 64 bytes of slack on each side, plus room to align.
            std::vector<char> buf(bytes + 256, 0x5A);
            char* base = buf.data() + ((64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64);
            char* dst = base + 64 + offset;
            ReverseBlocks(dst, src.data() + 3, n, block, stream);
            StreamFence();
            for (int64_t i = 0; i < n; ++i) {
              ASSERT_EQ(std::memcmp(dst + i * block, src.data() + 3 + (n - 1 - i) * block, block),
                        0)
                  << "block index " << i;
            }
            for (char* p = buf.data(); p < dst; ++p) ASSERT_EQ(*p, 0x5A);
            for (char* p = dst + bytes; p < buf.data() + buf.size(); ++p) ASSERT_EQ(*p, 0x5A);
          }
        }
      }
    }
  }
  SetKernelIsa(std::nullopt);
}

// Every size class of the streamed copy's own head and tail copies (1, 2,
// 4, 8, 16, 32 bytes, overlapping) on each instruction set.
TEST(CopyBytesTest, StreamingMatchesMemcpyAtEveryAlignment) {
  std::mt19937 rng(::tensorops::testing::TestSeed(17));
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kSse2, KernelIsa::kScalar}) {
    SetKernelIsa(isa);
    for (bool stream : {false, true}) {
      for (int64_t n : {0,  1,  2,  3,  4,  5,  7,   8,   9,   15,  16,   17,   31,
                        32, 33, 47, 63, 64, 65, 127, 255, 256, 257, 1000, 4096, 4099}) {
        for (int64_t offset : {0, 1, 15, 16, 33, 63}) {
          SCOPED_TRACE(::testing::Message() << KernelIsaName(isa) << " stream " << stream << " n "
                                            << n << " offset " << offset);
          std::vector<char> src(n + 5);
          for (char& c : src) c = static_cast<char>(rng());
          std::vector<char> buf(n + 256, 0x5A);
          char* dst = buf.data() + 64 + offset;
          CopyBytes(dst, src.data() + 5, n, stream);
          StreamFence();
          ASSERT_EQ(std::memcmp(dst, src.data() + 5, n), 0);
          for (char* p = buf.data(); p < dst; ++p) ASSERT_EQ(*p, 0x5A);
          for (char* p = dst + n; p < buf.data() + buf.size(); ++p) ASSERT_EQ(*p, 0x5A);
        }
      }
    }
  }
  SetKernelIsa(std::nullopt);
}

// Plans decide once, from the output size, whether to stream.
TEST(AxisTransformPlanTest, StreamsFromTheThreshold) {
  const std::vector<DimTransform> t = {DimTransform::Reverse(), DimTransform::Copy()};
  EXPECT_FALSE(AxisTransformPlan(Shape{64, 64}, 4, t).streams());
  SetStreamingStoreMinBytes(64 * 64 * 4);
  EXPECT_TRUE(AxisTransformPlan(Shape{64, 64}, 4, t).streams());
  EXPECT_FALSE(AxisTransformPlan(Shape{64, 63}, 4, t).streams());
  SetStreamingStoreMinBytes(-1);
  EXPECT_EQ(StreamingStoreMinBytes(), kDefaultStreamingStoreMinBytes);
  EXPECT_TRUE(AxisTransformPlan(Shape{1024, 8192}, 4, t).streams());
}

TEST(AxisTransformPlanTest, SimplifiesShapes) {
  // [2, 1, 3, 4] reversing dims 0 and 2 (size-1 dim between): dims 0 and 2
  // merge into one reversed dim, dim 3 folds into the block.
  std::vector<DimTransform> t = {DimTransform::Reverse(), DimTransform::Reverse(),
                                 DimTransform::Reverse(), DimTransform::Copy()};
  AxisTransformPlan plan(Shape{2, 1, 3, 4}, 4, t);
  EXPECT_EQ(plan.simplified_rank(), 1);
  EXPECT_EQ(plan.block_bytes(), 16);
  EXPECT_EQ(plan.outer_size(), 6);
  // All copies fold into one block.
  AxisTransformPlan copy(Shape{5, 6}, 2, std::vector<DimTransform>(2, DimTransform::Copy()));
  EXPECT_EQ(copy.simplified_rank(), 0);
  EXPECT_EQ(copy.block_bytes(), 60);
}

// Rolls and rolled reversals along the innermost dim, which the streaming
// path writes as whole lines when rows are whole lines of an aligned output
// (StreamWholeLineRows), against the definition element by element: every
// instruction set, element widths with and without a lane reversal, rows of
// whole lines and not, outputs aligned and 16 bytes past a line, the outer dim
// copied or reversed, and the rows at once (RunRowsUnfenced, as a fused chain
// calls it).
TEST(AxisTransformPlanTest, StreamedRollsMatchDefinition) {
  std::mt19937 rng(::tensorops::testing::TestSeed(19));
  SetStreamingStoreMinBytes(0);
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kSse2, KernelIsa::kScalar}) {
    SetKernelIsa(isa);
    for (int64_t w : {1, 2, 4, 8, 16, 12}) {
      for (int64_t row_bytes : {64, 128, 256, 2048, 8192, 8256}) {
        const int64_t n = std::max<int64_t>(2, row_bytes / w);
        for (int64_t c : {int64_t{0}, int64_t{1}, n / 2, n - 2}) {
          for (bool reverse : {false, true}) {
            for (bool outer_reversed : {false, true}) {
              for (int64_t offset : {0, 16}) {
                SCOPED_TRACE(::testing::Message()
                             << KernelIsaName(isa) << " w " << w << " n " << n << " c " << c
                             << " reverse " << reverse << " outer_reversed " << outer_reversed
                             << " offset " << offset);
                const int64_t rows = 5, row = n * w;
                std::vector<char> src(rows * row);
                for (char& ch : src) ch = static_cast<char>(rng());
                const DimTransform inner =
                    reverse ? DimTransform::ReverseRoll(c) : DimTransform::Roll(c);
                const DimTransform outer =
                    outer_reversed ? DimTransform::Reverse() : DimTransform::Copy();
                AxisTransformPlan plan(Shape{rows, n}, w, {outer, inner});
                std::vector<char> buf(rows * row + 192, 0x5A);
                char* base =
                    buf.data() + ((64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64);
                char* dst = base + 64 + offset;
                plan.Run(src.data(), dst);
                for (int64_t r = 0; r < rows; ++r) {
                  const int64_t rs = outer_reversed ? rows - 1 - r : r;
                  for (int64_t j = 0; j < n; ++j) {
                    // Roll: out j reads (j - c) mod n; ReverseRoll: (c - j) mod n.
                    const int64_t from = reverse ? ((c - j) % n + n) % n : ((j - c) % n + n) % n;
                    ASSERT_EQ(
                        std::memcmp(dst + r * row + j * w, src.data() + rs * row + from * w, w), 0)
                        << "row " << r << " element " << j;
                  }
                }
                for (char* p = buf.data(); p < dst; ++p) ASSERT_EQ(*p, 0x5A);
                for (char* p = dst + rows * row; p < buf.data() + buf.size(); ++p) {
                  ASSERT_EQ(*p, 0x5A);
                }
                // The rows at once, as a fused chain runs its inner blocks.
                AxisTransformPlan inner_plan(Shape{n}, w, {inner}, /*stream=*/true);
                std::vector<char> again(rows * row + 128, 0x5A);
                char* dst2 = again.data() +
                             ((64 - reinterpret_cast<uintptr_t>(again.data()) % 64) % 64) + offset;
                inner_plan.RunRowsUnfenced(src.data(), row, dst2, row, rows);
                StreamFence();
                for (int64_t r = 0; r < rows; ++r) {
                  for (int64_t j = 0; j < n; ++j) {
                    const int64_t from = reverse ? ((c - j) % n + n) % n : ((j - c) % n + n) % n;
                    ASSERT_EQ(
                        std::memcmp(dst2 + r * row + j * w, src.data() + r * row + from * w, w), 0)
                        << "rows at once: row " << r << " element " << j;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  SetKernelIsa(std::nullopt);
  SetStreamingStoreMinBytes(-1);
}

// The forced instruction set: names round-trip, an override is capped at
// what the CPU has, and nullopt restores the start-up choice.
TEST(KernelIsaTest, OverrideIsCappedAndRestored) {
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kSse2, KernelIsa::kScalar}) {
    EXPECT_EQ(ParseKernelIsa(KernelIsaName(isa)), isa);
    SetKernelIsa(isa);
    EXPECT_EQ(ActiveKernelIsa(), std::min(isa, CpuKernelIsa()));
  }
  EXPECT_EQ(ParseKernelIsa("avx512"), std::nullopt);
  EXPECT_EQ(ParseKernelIsa(""), std::nullopt);
  SetKernelIsa(std::nullopt);
  const KernelIsa startup = ActiveKernelIsa();
  EXPECT_LE(startup, CpuKernelIsa());
#if defined(__x86_64__)
  EXPECT_GE(CpuKernelIsa(), KernelIsa::kSse2);  // baseline x86-64
#endif
}

}  // namespace
}  // namespace tensorops
