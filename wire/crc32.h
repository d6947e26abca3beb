// CRC-32 of tensor bytes for ExecuteStream (server and client SDK): the
// ISO-HDLC polynomial of zlib's crc32(), Python's zlib.crc32() and gzip, so a
// caller by hand can compute it with any of them. ISA-L's crc32_gzip_refl
// does the work (PCLMULQDQ folding: 8-10 GB/s per core here against zlib's
// 2-2.5 GB/s, the same bits); zlib's crc32_combine joins the parts when a
// pool splits a big buffer.
//
// Thread-safety: a pure function.
#ifndef TENSOROPS_WIRE_CRC32_H_
#define TENSOROPS_WIRE_CRC32_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "kernels/thread_pool.h"

namespace tensorops {

// CRC-32 of `size` bytes continuing from `crc` (0 to start; the result of an
// earlier call continues it). With a pool of 2+ threads, buffers of 32 MiB
// or more are split into 16 MiB blocks across it and the parts combined.
uint32_t Crc32(uint32_t crc, const void* data, int64_t size, ThreadPool* pool = nullptr);

// The CRC-32 of A then B from crc(A), crc(B) and B's length (zlib's crc32_combine).
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, int64_t size_b);

// Hands `src` to `copy(const char* block, size_t n)` in 64 KiB blocks and
// continues `crc` over each block right after the copy read it, while it is
// still in cache: one pass over memory instead of two. Returns the new CRC.
//
// Example (append to a string and checksum in the same pass):
//   crc = Crc32WhileCopying(crc, piece, [&](const char* p, size_t n) { out.append(p, n); });
template <typename Copy>
uint32_t Crc32WhileCopying(uint32_t crc, absl::string_view src, Copy copy) {
  constexpr size_t kBlock = size_t{64} << 10;  // well inside L2
  for (size_t done = 0; done < src.size(); done += kBlock) {
    const size_t n = std::min(kBlock, src.size() - done);
    copy(src.data() + done, n);
    crc = Crc32(crc, src.data() + done, static_cast<int64_t>(n));
  }
  return crc;
}

// The CRC-32 of a tensor of `total` bytes from the CRC-32s of its pieces,
// added in any order of offsets (a flowing stream's output chunks, server and
// SDK): CRC-32 is affine in the bytes, so each piece's share is its CRC moved
// to its place (zlib's crc32_combine with zeros after it) and the shares XOR
// together. Constant memory whatever the number of pieces, unlike combining
// in order, which would have to keep every early piece's CRC.
//
// Example:
//   Crc32OfPieces whole(8);
//   whole.Add(4, 4, Crc32(0, "5678", 4));
//   whole.Add(0, 4, Crc32(0, "1234", 4));
//   whole.Value() == Crc32(0, "12345678", 8)
//
// Thread-safety: none; a value type.
class Crc32OfPieces {
 public:
  explicit Crc32OfPieces(int64_t total);
  // A piece of `size` bytes at `offset` (inside [0, total)) whose CRC-32 is
  // `crc`. The pieces must not overlap; Value is the whole's CRC once they
  // cover it.
  void Add(int64_t offset, int64_t size, uint32_t crc);
  uint32_t Value() const;

 private:
  int64_t total_;
  uint32_t shares_ = 0;
  // The CRC of `size` zeros for the last size seen (chunks mostly share one).
  int64_t zeros_size_ = 0;
  uint32_t zeros_crc_ = 0;
};

// CRC-32 of `n` zero bytes, without reading them (O(log n)).
uint32_t Crc32OfZeros(int64_t n);

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_CRC32_H_
