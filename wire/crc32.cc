#include "wire/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <vector>

namespace tensorops {
namespace {

constexpr int64_t kBlockBytes = int64_t{16} << 20;

}  // namespace

uint32_t Crc32(uint32_t crc, const void* data, int64_t size, ThreadPool* pool) {
  const auto* bytes = static_cast<const Bytef*>(data);
  if (pool == nullptr || pool->num_threads() < 2 || size < 2 * kBlockBytes) {
    return static_cast<uint32_t>(crc32_z(crc, bytes, static_cast<z_size_t>(size)));
  }
  const int64_t blocks = (size + kBlockBytes - 1) / kBlockBytes;
  std::vector<uint32_t> parts(blocks);
  pool->ParallelFor(blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t begin = i * kBlockBytes;
      const int64_t n = std::min(kBlockBytes, size - begin);
      parts[i] = static_cast<uint32_t>(crc32_z(0, bytes + begin, static_cast<z_size_t>(n)));
    }
  });
  uLong total = crc;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t n = std::min(kBlockBytes, size - i * kBlockBytes);
    total = crc32_combine(total, parts[i], static_cast<z_off_t>(n));
  }
  return static_cast<uint32_t>(total);
}

}  // namespace tensorops
