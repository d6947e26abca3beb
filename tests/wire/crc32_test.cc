// wire/crc32.h: the parallel path (blocks on a pool, combined with
// crc32_combine) gives exactly the serial CRC, for sizes around the block and
// threshold edges, and continues from a non-zero start; and ISA-L, which
// computes it, agrees bit for bit with zlib's crc32 (the protocol's
// definition) at every length, alignment and split.
#include "wire/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/thread_pool.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(Crc32Test, KnownValue) {
  // zlib.crc32(b"123456789") == 0xcbf43926 (the CRC-32/ISO-HDLC check value).
  const char text[] = "123456789";
  EXPECT_EQ(Crc32(0, text, 9), 0xcbf43926u);
  // Continuing from a prefix's CRC gives the whole buffer's.
  EXPECT_EQ(Crc32(Crc32(0, text, 4), text + 4, 5), 0xcbf43926u);
}

uint32_t ZlibCrc(uint32_t crc, const unsigned char* p, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, p, n));
}

TEST(Crc32Test, EqualsZlibAtEveryLengthAlignmentAndSplit) {
  std::vector<unsigned char> data(4 * kMiB + 64);
  std::mt19937_64 rng(::tensorops::testing::TestSeed(7));
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  // Short lengths take the folding code's head and tail paths; every start
  // alignment within a cache line.
  for (size_t align = 0; align < 64; ++align) {
    for (size_t n = 0; n <= 300; ++n) {
      ASSERT_EQ(Crc32(0, data.data() + align, static_cast<int64_t>(n)),
                ZlibCrc(0, data.data() + align, n))
          << "align " << align << ", " << n << " bytes";
    }
  }
  for (const size_t n : {size_t{4095}, size_t{65536}, size_t{1000003}, size_t{4} * kMiB}) {
    EXPECT_EQ(Crc32(0, data.data() + 3, static_cast<int64_t>(n)), ZlibCrc(0, data.data() + 3, n))
        << n;
  }
  // Continued over chunks of random sizes, as a stream's CRC is.
  uint32_t ours = 0;
  size_t at = 0;
  while (at < data.size()) {
    const size_t n = std::min<size_t>(data.size() - at, rng() % 70000);
    ours = Crc32(ours, data.data() + at, static_cast<int64_t>(n));
    at += n;
  }
  EXPECT_EQ(ours, ZlibCrc(0, data.data(), data.size()));
}

TEST(Crc32Test, WhileCopyingHandsOverEveryByteOnceAndGivesTheSameCrc) {
  std::vector<unsigned char> data(200 * 1024 + 17);
  std::mt19937_64 rng(::tensorops::testing::TestSeed(9));
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const absl::string_view src(reinterpret_cast<const char*>(data.data()), data.size());
  for (const size_t n : {size_t{0}, size_t{1}, size_t{65536}, size_t{65537}, src.size()}) {
    std::string copied;
    int calls = 0;
    const uint32_t start = Crc32(0, "x", 1);
    const uint32_t crc = Crc32WhileCopying(start, src.substr(0, n), [&](const char* p, size_t k) {
      copied.append(p, k);
      ++calls;
    });
    EXPECT_EQ(copied, std::string(src.substr(0, n))) << n;
    EXPECT_EQ(crc, Crc32(start, src.data(), static_cast<int64_t>(n))) << n;
    EXPECT_EQ(calls, static_cast<int>((n + 65535) / 65536)) << n;
  }
}

TEST(Crc32Test, PoolSplitEqualsSerial) {
  std::vector<unsigned char> data(80 * kMiB + 3);
  std::mt19937_64 rng(::tensorops::testing::TestSeed(42));
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  ThreadPool pool(3);
  // Below the 32 MiB threshold (serial either way), at it, one byte past a
  // 16 MiB block, several blocks and a short tail.
  for (const int64_t size : {31 * kMiB, 32 * kMiB, 48 * kMiB + 1, 80 * kMiB + 3}) {
    SCOPED_TRACE(size);
    const uint32_t serial = Crc32(0, data.data(), size);
    EXPECT_EQ(Crc32(0, data.data(), size, &pool), serial);
    // From a non-zero start too (a stream's CRC continues across chunks).
    const uint32_t start = Crc32(0, "x", 1);
    EXPECT_EQ(Crc32(start, data.data(), size, &pool), Crc32(start, data.data(), size));
  }
}

TEST(Crc32Test, ZerosEqualsTheCrcOfZeroBytes) {
  for (const int64_t n : {0, 1, 2, 3, 7, 64, 1000, 65536, 1 << 20}) {
    SCOPED_TRACE(n);
    const std::string zeros(static_cast<size_t>(n), '\0');
    EXPECT_EQ(Crc32OfZeros(n), Crc32(0, zeros.data(), n));
  }
}

TEST(Crc32Test, PiecesInAnyOrderGiveTheWholeCrc) {
  std::mt19937_64 rng(::tensorops::testing::TestSeed(7));
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    const int64_t total = static_cast<int64_t>(rng() % 5000);
    std::string bytes(static_cast<size_t>(total), '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Random cuts, then the pieces added in a shuffled order.
    std::vector<int64_t> cuts = {0, total};
    for (int k = 0; k < static_cast<int>(rng() % 12); ++k) cuts.push_back(rng() % (total + 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<std::pair<int64_t, int64_t>> pieces;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) pieces.push_back({cuts[i], cuts[i + 1] - cuts[i]});
    std::shuffle(pieces.begin(), pieces.end(), rng);
    Crc32OfPieces whole(total);
    for (const auto& [offset, size] : pieces) {
      whole.Add(offset, size, Crc32(0, bytes.data() + offset, size));
    }
    EXPECT_EQ(whole.Value(), Crc32(0, bytes.data(), total));
  }
}

}  // namespace
}  // namespace tensorops
