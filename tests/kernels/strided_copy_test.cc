// ReverseBlocks across every width and lengths around the vector sizes (the
// AVX2 path handles 2 x 32 bytes per step, the scalar loop the tail).
#include "kernels/strided_copy.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tensorops {
namespace {

TEST(ReverseBlocksTest, MatchesBlockByBlockReversal) {
  std::mt19937 rng(7);
  for (int64_t block : {1, 2, 3, 4, 8, 12, 16, 24}) {
    for (int64_t n = 0; n <= 300; ++n) {
      SCOPED_TRACE(testing::Message() << "block " << block << " n " << n);
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
  std::mt19937 rng(11);
  for (int64_t block : {1, 2, 4, 8, 16, 3}) {
    for (int64_t n : {1, 5, 31, 32, 33, 64, 100, 256}) {
      SCOPED_TRACE(testing::Message() << "block " << block << " n " << n);
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

}  // namespace
}  // namespace tensorops
