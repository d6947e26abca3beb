#include "kernels/strided_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/rolled_rows.h"
#include "kernels/streaming_store.h"

namespace tensorops {
namespace {

// Largest row the innermost-roll path assembles on the stack (L1 is 32-48 KiB).
constexpr int64_t kRollScratchBytes = 8192;

}  // namespace

AxisTransformPlan::AxisTransformPlan(const Shape& shape, int64_t elem_width,
                                     absl::Span<const DimTransform> per_dim)
    : AxisTransformPlan(shape, elem_width, per_dim, /*stream=*/false) {
  if (!empty_) stream_ = NumElements(shape) * elem_width >= StreamingStoreMinBytes();
}

AxisTransformPlan::AxisTransformPlan(const Shape& shape, int64_t elem_width,
                                     absl::Span<const DimTransform> per_dim, bool stream) {
  using Kind = DimTransform::Kind;
  for (int64_t d : shape) {
    if (d == 0) empty_ = true;
  }
  // Nothing to move; and with a zero dim the other dims may be huge, so
  // their products (strides below) could overflow.
  if (empty_) return;
  // 1. Drop size-1 dims (every transform is the identity on them) and rolls by 0.
  struct Simple {
    int64_t size;
    DimTransform t;
  };
  absl::InlinedVector<Simple, 6> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    DimTransform t = per_dim[i];
    if (t.kind == Kind::kRoll && t.shift == 0) t = DimTransform::Copy();
    if (t.kind == Kind::kReverseRoll && t.shift == shape[i] - 1) t = DimTransform::Reverse();
    // 2. Merge neighbours: copy+copy is a copy; reverse+reverse is a reverse
    //    of the flattened dim (index i*n2+j maps to (n1-1-i)*n2 + (n2-1-j)).
    if (!dims.empty() && t.kind == dims.back().t.kind &&
        (t.kind == Kind::kCopy || t.kind == Kind::kReverse)) {
      dims.back().size *= shape[i];
    } else {
      dims.push_back({shape[i], t});
    }
  }
  // 3. Fold untouched trailing dims into the contiguous block.
  block_ = elem_width;
  while (!dims.empty() && dims.back().t.kind == Kind::kCopy) {
    block_ *= dims.back().size;
    dims.pop_back();
  }
  // Byte strides, innermost first; `stride` ends as the tensor's bytes.
  dims_.resize(dims.size());
  int64_t stride = block_;
  for (size_t i = dims.size(); i-- > 0;) {
    Dim& out = dims_[i];
    const int64_t n = dims[i].size;
    out.size = n;
    out.stride = stride;
    stride *= n;
    switch (dims[i].t.kind) {
      case Kind::kCopy:
        out.segments.push_back({0, 0, n, false});
        break;
      case Kind::kReverse:
        out.segments.push_back({0, n - 1, n, true});
        break;
      case Kind::kRoll: {
        // out[j] = in[(j - s) mod n]: out[0, s) <- in[n-s, n); out[s, n) <- in[0, n-s).
        const int64_t s = dims[i].t.shift;
        out.segments.push_back({0, n - s, s, false});
        out.segments.push_back({s, 0, n - s, false});
        break;
      }
      case Kind::kReverseRoll: {
        // out[j] = in[(c - j) mod n]: out[0, c] <- in[c..0]; out(c, n) <- in[n-1..c+1].
        const int64_t c = dims[i].t.shift;
        out.segments.push_back({0, c, c + 1, true});
        if (c + 1 < n) out.segments.push_back({c + 1, n - 1, n - 1 - c, true});
        break;
      }
    }
  }
  stream_ = stream;
}

void AxisTransformPlan::Recurse(size_t d, const char* in, char* out) const {
  const Dim& dim = dims_[d];
  if (d + 1 == dims_.size()) {
    // Innermost: the dim's stride is the block, so forward segments are one memcpy.
    for (const Segment& s : dim.segments) {
      if (s.reversed) {
        ReverseBlocks(out + s.out_start * block_, in + (s.in_start - s.count + 1) * block_, s.count,
                      block_, stream_);
      } else {
        CopyBytes(out + s.out_start * block_, in + s.in_start * block_, s.count * block_, stream_);
      }
    }
    return;
  }
  for (const Segment& s : dim.segments) {
    const int64_t in_step = s.reversed ? -dim.stride : dim.stride;
    Rows(d, in + s.in_start * dim.stride, in_step, out + s.out_start * dim.stride, dim.stride,
         s.count);
  }
}

void AxisTransformPlan::Rows(size_t d, const char* in, int64_t in_step, char* out, int64_t out_step,
                             int64_t count) const {
  if (in_step < 0 && count > 1) {
    // Rows of a reversed dim: walk them in the input's order instead. Reads
    // that descend row by row are followed by no prefetcher, while the
    // streaming stores do not mind descending (a 4-op chain, FLOAT32
    // 256 MiB, 1 thread: 0.61x -> 1.69x memcpy).
    in += (count - 1) * in_step;
    out += (count - 1) * out_step;
    in_step = -in_step;
    out_step = -out_step;
  }
  if (d + 2 == dims_.size()) {
    const Dim& inner = dims_[d + 1];
    if (inner.segments.size() == 1 && inner.segments[0].reversed) {
      // Reverse along the innermost dim: every row is one reversal of
      // inner.size blocks; do them all in one call.
      ReverseRows(out, in, inner.size, block_, count, out_step, in_step, stream_);
      return;
    }
    const int64_t row_bytes = inner.size * block_;
    if (StreamWholeLineRows(inner.segments, in, in_step, out, out_step, count)) return;
    const bool rolled = inner.segments.size() == 2 && !inner.segments[0].reversed;
    if (stream_ && rolled && row_bytes <= kRollScratchBytes) {
      // Roll along the innermost dim, output past the cache, rows not whole
      // aligned lines: a row is two copies whose seam falls inside a cache
      // line, and a line that takes both an ordinary and a streaming store
      // is read back and written twice. Assemble the row in an L1 scratch
      // buffer instead and stream it out whole (0.77-0.89x memcpy ->
      // 0.99-1.09x for rows of 1-2 KiB, ../shared/perf-notes.md),
      // prefetching two rows ahead. (Reversed runs, below, write their
      // partial lines with ordinary stores only, so they go straight out:
      // staging them cost a second pass, 8-op chains 0.63x -> 0.98x memcpy.)
      alignas(64) char scratch[kRollScratchBytes];
      for (int64_t k = 0; k < count; ++k, in += in_step, out += out_step) {
        if (k + 2 < count) {
          for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(in + 2 * in_step + b);
        }
        for (const Segment& seg : inner.segments) {
          if (seg.reversed) {
            ReverseBlocks(scratch + seg.out_start * block_,
                          in + (seg.in_start - seg.count + 1) * block_, seg.count, block_);
          } else {
            std::memcpy(scratch + seg.out_start * block_, in + seg.in_start * block_,
                        seg.count * block_);
          }
        }
        CopyBytes(out, scratch, row_bytes, true);
      }
      return;
    }
    if (!rolled && std::all_of(inner.segments.begin(), inner.segments.end(),
                               [](const Segment& seg) { return seg.reversed; })) {
      // Reversed runs only (kReverseRoll).
      Runs(inner.segments, in, in_step, out, out_step, count);
      return;
    }
  }
  for (int64_t k = 0; k < count; ++k, in += in_step, out += out_step) Recurse(d + 1, in, out);
}

void AxisTransformPlan::RunRange(const void* in, void* out, int64_t begin, int64_t end) const {
  if (empty_ || begin >= end) return;
  RunRangeUnfenced(in, out, begin, end);
  // The caller may hand the output to another thread next (ParallelFor's
  // join, the reply): make the weakly ordered streaming stores visible first.
  if (stream_) StreamFence();
}

void AxisTransformPlan::RunRowsUnfenced(const void* in_v, int64_t in_step, void* out_v,
                                        int64_t out_step, int64_t rows) const {
  if (empty_ || rows <= 0) return;
  const auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  if (in_step < 0 && rows > 1) {  // read in the input's order, as Rows does
    in += (rows - 1) * in_step;
    out += (rows - 1) * out_step;
    in_step = -in_step;
    out_step = -out_step;
  }
  if (dims_.size() != 1) {
    for (int64_t k = 0; k < rows; ++k) {
      RunRangeUnfenced(in + k * in_step, out + k * out_step, 0, outer_size());
    }
    return;
  }
  Runs(dims_[0].segments, in, in_step, out, out_step, rows);
}

bool AxisTransformPlan::StreamWholeLineRows(absl::Span<const Segment> segments, const char* in,
                                            int64_t in_step, char* out, int64_t out_step,
                                            int64_t rows) const {
#if defined(__x86_64__)
  // A roll or a rolled reversal along the innermost dim, output past the
  // cache, short rows of whole aligned lines (the server's big outputs are
  // page-aligned). Longer rows are two long copies, whose one shared line
  // does not matter.
  if (!stream_ || segments.size() != 2 || segments[0].reversed != segments[1].reversed) {
    return false;
  }
  const int64_t row_bytes = (segments[0].count + segments[1].count) * block_;
  if (row_bytes > kRollScratchBytes || row_bytes % 64 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 64 != 0 || out_step % 64 != 0) {
    return false;
  }
  if (!segments[0].reversed) {
    StreamRolledRows({out, in, row_bytes, segments[0].in_start * block_, rows, out_step, in_step});
    return true;
  }
  // Output element 0 reads input element c = segments[0].in_start.
  return StreamReverseRolledRows(
      {out, in, row_bytes, (segments[0].in_start + 1) * block_, rows, out_step, in_step}, block_);
#else
  (void)segments, (void)in, (void)in_step, (void)out, (void)out_step, (void)rows;
  return false;
#endif
}

void AxisTransformPlan::Runs(absl::Span<const Segment> segments, const char* in, int64_t in_step,
                             char* out, int64_t out_step, int64_t rows) const {
  if (StreamWholeLineRows(segments, in, in_step, out, out_step, rows)) return;
  // One call per run for a batch of rows, not a call per run and row; the
  // batches (~128 KiB) small enough that a line two runs share (written by
  // both with ordinary stores) is still in L2 for the second run (a pass per
  // run over all the rows read and wrote it twice from DRAM), and large
  // enough that the first rows of a batch, which ReverseRows does not
  // prefetch, are few (8-op chains, 256 MiB, 1 thread: 16 KiB batches
  // 0.72x, 128 KiB 0.90x memcpy).
  int64_t row_bytes = 0;
  for (const Segment& seg : segments) row_bytes += seg.count * block_;
  const int64_t batch =
      std::max<int64_t>(1, (int64_t{128} << 10) / std::max<int64_t>(1, row_bytes));
  for (int64_t k0 = 0; k0 < rows; k0 += batch) {
    const int64_t n = std::min(batch, rows - k0);
    const char* i = in + k0 * in_step;
    char* o = out + k0 * out_step;
    for (const Segment& seg : segments) {
      if (seg.reversed) {
        ReverseRows(o + seg.out_start * block_, i + (seg.in_start - seg.count + 1) * block_,
                    seg.count, block_, n, out_step, in_step, stream_);
        continue;
      }
      for (int64_t k = 0; k < n; ++k) {
        CopyBytes(o + k * out_step + seg.out_start * block_,
                  i + k * in_step + seg.in_start * block_, seg.count * block_, stream_);
      }
    }
  }
}

void AxisTransformPlan::RunRangeUnfenced(const void* in_v, void* out_v, int64_t begin,
                                         int64_t end) const {
  if (empty_ || begin >= end) return;
  const auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  if (dims_.empty()) {
    // Everything folded: the op is a plain copy of one block, and glibc's
    // memcpy picks its own stores for that.
    if (begin == 0) std::memcpy(out, in, block_);
    return;
  }
  const Dim& dim = dims_[0];
  for (const Segment& s : dim.segments) {
    // Clip the segment to output rows [begin, end).
    const int64_t k0 = std::max<int64_t>(0, begin - s.out_start);
    const int64_t k1 = std::min<int64_t>(s.count, end - s.out_start);
    if (k0 >= k1) continue;
    const int64_t in_first = s.reversed ? s.in_start - k0 : s.in_start + k0;
    if (dims_.size() == 1) {
      if (s.reversed) {
        ReverseBlocks(out + (s.out_start + k0) * block_, in + (in_first - (k1 - k0) + 1) * block_,
                      k1 - k0, block_, stream_);
      } else {
        CopyBytes(out + (s.out_start + k0) * block_, in + in_first * block_, (k1 - k0) * block_,
                  stream_);
      }
      continue;
    }
    const int64_t in_step = s.reversed ? -dim.stride : dim.stride;
    Rows(0, in + in_first * dim.stride, in_step, out + (s.out_start + k0) * dim.stride, dim.stride,
         k1 - k0);
  }
}

}  // namespace tensorops
