#include "wire/crc32.h"

#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>
#include <vector>

namespace tensorops {
namespace {

constexpr int64_t kBlockBytes = int64_t{16} << 20;

// ISA-L takes a 64-bit length; zlib's convention for `crc` (the finished
// value of the bytes before, 0 to start) is ISA-L's crc32_gzip_refl's too.
uint32_t Crc32Serial(uint32_t crc, const unsigned char* bytes, int64_t size) {
  return crc32_gzip_refl(crc, bytes, static_cast<uint64_t>(size));
}

}  // namespace

uint32_t Crc32(uint32_t crc, const void* data, int64_t size, ThreadPool* pool) {
  const auto* bytes = static_cast<const Bytef*>(data);
  if (pool == nullptr || pool->num_threads() < 2 || size < 2 * kBlockBytes) {
    return Crc32Serial(crc, bytes, size);
  }
  const int64_t blocks = (size + kBlockBytes - 1) / kBlockBytes;
  std::vector<uint32_t> parts(blocks);
  pool->ParallelFor(blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t begin = i * kBlockBytes;
      const int64_t n = std::min(kBlockBytes, size - begin);
      parts[i] = Crc32Serial(0, bytes + begin, n);
    }
  });
  uLong total = crc;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t n = std::min(kBlockBytes, size - i * kBlockBytes);
    total = crc32_combine(total, parts[i], static_cast<z_off_t>(n));
  }
  return static_cast<uint32_t>(total);
}

uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, int64_t size_b) {
  return static_cast<uint32_t>(crc32_combine(crc_a, crc_b, static_cast<z_off_t>(size_b)));
}

uint32_t Crc32OfZeros(int64_t n) {
  // zlib's crc32_combine(a, 0, n) multiplies a by x^(8n): what the CRC
  // register's start value 0xffffffff becomes over n zeros, before the final
  // inversion.
  return static_cast<uint32_t>(crc32_combine(0xffffffffUL, 0, static_cast<z_off_t>(n))) ^
         0xffffffffu;
}

Crc32OfPieces::Crc32OfPieces(int64_t total) : total_(total) {}

void Crc32OfPieces::Add(int64_t offset, int64_t size, uint32_t crc) {
  // crc(whole) = crc(zeros(total)) ^ XOR over pieces of
  //   shift(crc(piece) ^ crc(zeros(size)), bytes after the piece):
  // a piece among zeros differs from all zeros by its linear part only.
  if (size != zeros_size_) {
    zeros_size_ = size;
    zeros_crc_ = Crc32OfZeros(size);
  }
  const int64_t after = total_ - offset - size;
  shares_ ^= static_cast<uint32_t>(crc32_combine(crc ^ zeros_crc_, 0, static_cast<z_off_t>(after)));
}

uint32_t Crc32OfPieces::Value() const { return shares_ ^ Crc32OfZeros(total_); }

}  // namespace tensorops
