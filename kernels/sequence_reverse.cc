#include "kernels/sequence_reverse.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/streaming_store.h"
#include "kernels/strided_copy.h"

namespace tensorops {

SequenceReversePlan::SequenceReversePlan(const Shape& shape, int64_t elem_width, int64_t batch_axis,
                                         int64_t seq_axis, std::vector<int64_t> lengths)
    : batch_first_(batch_axis < seq_axis),
      inner_bytes_(elem_width),
      seq_len_(shape[seq_axis]),
      lengths_(std::move(lengths)) {
  for (int64_t d : shape) {
    // Empty output: units() = 0 and no product below is needed (with a zero
    // dim the others may be huge enough to overflow).
    if (d == 0) {
      outer_ = 0;
      return;
    }
  }
  const int64_t first = std::min(batch_axis, seq_axis);
  const int64_t second = std::max(batch_axis, seq_axis);
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < first; ++d) outer_ *= shape[d];
  a_ = shape[first];
  for (int64_t d = first + 1; d < second; ++d) mid_ *= shape[d];
  b_ = shape[second];
  for (int64_t d = second + 1; d < rank; ++d) inner_bytes_ *= shape[d];
  // A length of 0 or 1 reverses nothing; treat both as 0 below.
  for (int64_t& len : lengths_) {
    if (len <= 1) len = 0;
  }
  stream_ = outer_ * a_ * mid_ * b_ * inner_bytes_ >= StreamingStoreMinBytes();
}

void SequenceReversePlan::RunRange(const void* in_v, void* out_v, int64_t begin,
                                   int64_t end) const {
  const auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  const int64_t row = b_ * inner_bytes_;  // bytes of one [B, inner] row
  for (int64_t u = begin; u < end; ++u) {
    const int64_t o = u / a_;
    const int64_t a = u - o * a_;
    if (batch_first_) {
      // Layout [outer, batch, mid, seq, inner]: each (o, a, m) row is one
      // sequence; reverse its first `len` blocks, copy the tail as one run.
      const int64_t len = lengths_[a];
      for (int64_t m = 0; m < mid_; ++m) {
        const int64_t off = ((o * a_ + a) * mid_ + m) * row;
        if (len > 0) ReverseBlocks(out + off, in + off, len, inner_bytes_, stream_);
        CopyBytes(out + off + len * inner_bytes_, in + off + len * inner_bytes_,
                  (seq_len_ - len) * inner_bytes_, stream_);
      }
    } else if (stream_) {
      // Layout [outer, seq, mid, batch, inner], output past the cache. Here
      // unit u names an *input* row s: its block for batch i goes to output
      // row len_i-1-s (s < len_i) or s. For each batch that map is a
      // bijection on [0, seq), so units still write disjoint outputs and
      // together all of it. Gathering by output row instead reads `batch`
      // short runs from different rows, each a separate DRAM access the
      // prefetcher does not follow (0.45-0.66x memcpy; 0.86x with software
      // prefetch); reading every input row in order and streaming whole
      // blocks to where they go keeps the reads sequential, and streaming
      // stores do not care where whole lines land (1.35-1.38x,
      // ../shared/perf-notes.md).
      const int64_t s = a;
      for (int64_t m = 0; m < mid_; ++m) {
        const char* src = in + ((o * a_ + s) * mid_ + m) * row;
        char* out_m = out + (o * a_ * mid_ + m) * row;
        int64_t i = 0;
        while (i < b_) {
          const int64_t t = s < lengths_[i] ? lengths_[i] - 1 - s : s;
          int64_t j = i + 1;
          while (j < b_ && (s < lengths_[j] ? lengths_[j] - 1 - s : s) == t) ++j;
          CopyBytes(out_m + t * mid_ * row + i * inner_bytes_, src + i * inner_bytes_,
                    (j - i) * inner_bytes_, true);
          i = j;
        }
      }
    } else {
      // Layout [outer, seq, mid, batch, inner]: output row t of batch i comes
      // from sequence position len_i-1-t (t < len_i) or t. Neighbouring
      // batches with the same source position form one contiguous run.
      const int64_t t = a;
      for (int64_t m = 0; m < mid_; ++m) {
        char* dst = out + ((o * a_ + t) * mid_ + m) * row;
        int64_t i = 0;
        while (i < b_) {
          const int64_t src_t = t < lengths_[i] ? lengths_[i] - 1 - t : t;
          int64_t j = i + 1;
          while (j < b_ && (t < lengths_[j] ? lengths_[j] - 1 - t : t) == src_t) ++j;
          const char* src = in + ((o * a_ + src_t) * mid_ + m) * row;
          std::memcpy(dst + i * inner_bytes_, src + i * inner_bytes_, (j - i) * inner_bytes_);
          i = j;
        }
      }
    }
  }
  // Another thread may read the output next: publish the streaming stores.
  if (stream_) StreamFence();
}

}  // namespace tensorops
