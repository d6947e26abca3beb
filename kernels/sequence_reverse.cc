#include "kernels/sequence_reverse.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/kernel_isa.h"
#include "kernels/reverse_rows.h"
#include "kernels/streaming_store.h"

namespace tensorops {
namespace {

// Time-major layout past the cache: output rows are written in blocks of
// kColumnBlockRows (one batch column at a time within a block), and the
// source block kPrefetchRows rows ahead in the same column is prefetched.
// Chosen by measurement on the 256 MiB bench shapes (blocks of 16 and 64,
// prefetch 0/4/8/16 tried; differences within the VM's noise except
// prefetch 0 vs 4, see docs/benchmarks-history.md, "Kernels: the issue 14
// runs").
constexpr int64_t kColumnBlockRows = 16;
constexpr int64_t kPrefetchRows = 4;

#if defined(__x86_64__)
// One input row [mid slice] of time step t scattered to the output: batch
// i's block goes to time step len_i-1-t (t < len_i) or t, as whole lines
// with streaming stores. The line copy is inlined and there is no branch on
// the data: an out-of-line copy call per 256-byte block, and merging
// neighbours that share a destination, each cost a third of the speed at
// 256 MiB; AVX2 stores another 10-20 % over SSE2.
struct ScatterRow {
  const char* src;  // the input row
  char* out_m;      // output at time step 0 of this row's outer/mid slice
  int64_t t;        // its time step
  int64_t t_step;   // bytes between time steps
  int64_t inner;    // block bytes, a multiple of 64
  const int64_t* lengths;
  int64_t batches;
};

struct ScatterRows {
  template <typename Isa>
  static void Run(const ScatterRow* row) {
    // A copy in locals: the streaming stores go through may-alias vector
    // pointers, after which the compiler would reload every field of *row.
    const ScatterRow r = *row;
    for (int64_t i = 0; i < r.batches; ++i) {
      const int64_t len = r.lengths[i];
      char* dst = r.out_m + (r.t < len ? len - 1 - r.t : r.t) * r.t_step + i * r.inner;
      const char* src = r.src + i * r.inner;
      for (int64_t k = 0; k < r.inner; k += 64) LineOf<Isa>::Copy(dst + k, src + k);
    }
  }
};
#endif

}  // namespace

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
  // Time-major blocks that are whole 64-byte lines of the output.
  bool scatter = false;
  KernelIsa isa{};
#if defined(__x86_64__)
  scatter = stream_ && !batch_first_ && inner_bytes_ % 64 == 0 &&
            reinterpret_cast<uintptr_t>(out) % 64 == 0;
  isa = ActiveKernelIsa();
#endif
  for (int64_t u = begin; u < end; ++u) {
    const int64_t o = u / a_;
    const int64_t a = u - o * a_;
    if (batch_first_) {
      BatchFirstUnit(in, out, o, a);
    } else if (scatter) {
      ScatterUnit(in, out, o, a, isa);
    } else if (stream_) {
      u += ColumnBlock(in, out, o, a, end) - 1;  // the block covered units [u, u + n)
    } else {
      GatherUnit(in, out, o, a);
    }
  }
  // Another thread may read the output next: publish the streaming stores.
  if (stream_) StreamFence();
}

// Layout [outer, batch, mid, seq, inner]: each (o, a, m) row is one sequence;
// reverse its first `len` blocks, copy the tail as one run.
void SequenceReversePlan::BatchFirstUnit(const char* in, char* out, int64_t o, int64_t a) const {
  const int64_t row = b_ * inner_bytes_;  // bytes of one [B, inner] row
  const int64_t len = lengths_[a];
  for (int64_t m = 0; m < mid_; ++m) {
    const int64_t off = ((o * a_ + a) * mid_ + m) * row;
    if (len > 0) ReverseBlocks(out + off, in + off, len, inner_bytes_, stream_);
    CopyBytes(out + off + len * inner_bytes_, in + off + len * inner_bytes_,
              (seq_len_ - len) * inner_bytes_, stream_);
  }
}

// Layout [outer, seq, mid, batch, inner], output past the cache, every block
// whole lines: here unit u is an *input* row. Read it in order and stream each
// batch's block to its output row. The reads are one sequential stream the
// hardware prefetcher follows; the writes land anywhere, which streaming
// stores of whole lines do not mind (no read for ownership). The map from
// input to output rows is a bijection per batch, so disjoint unit ranges write
// disjoint bytes. (Only chosen on x86-64, where ScatterRows exists.)
void SequenceReversePlan::ScatterUnit(const char* in, char* out, int64_t o, int64_t a,
                                      KernelIsa isa) const {
#if defined(__x86_64__)
  const int64_t row = b_ * inner_bytes_;
  for (int64_t m = 0; m < mid_; ++m) {
    const ScatterRow r{in + ((o * a_ + a) * mid_ + m) * row,
                       out + (o * a_ * mid_ + m) * row,
                       a,
                       mid_ * row,
                       inner_bytes_,
                       lengths_.data(),
                       b_};
    IsaDispatch<ScatterRows>::On<const ScatterRow*>(isa)(&r);
  }
#else
  (void)in, (void)out, (void)o, (void)a, (void)isa;
#endif
}

// Layout [outer, seq, mid, batch, inner], output past the cache, blocks not
// whole lines (so the scatter above would mix ordinary and streaming stores
// in the lines at their edges). Row t of the output gathers one [inner] block
// per batch from `batch` different input rows; walking the output row by row
// keeps that many read streams going at once, each a few lines long, which
// the hardware prefetcher does not follow (0.2-0.5x memcpy). Instead walk one
// batch column at a time through a block of output rows: its source rows are
// consecutive (descending inside the reversed prefix), so the reads form one
// strided stream, helped by a software prefetch a few rows ahead; the writes
// are whole blocks with streaming stores.
int64_t SequenceReversePlan::ColumnBlock(const char* in, char* out, int64_t o, int64_t a,
                                         int64_t end) const {
  const int64_t row = b_ * inner_bytes_;
  const int64_t t0 = a;
  const int64_t t1 = std::min({a_, t0 + kColumnBlockRows, end - o * a_});
  for (int64_t m = 0; m < mid_; ++m) {
    const char* in_m = in + (o * a_ * mid_ + m) * row;
    char* out_m = out + (o * a_ * mid_ + m) * row;
    const int64_t t_step = mid_ * row;  // bytes from one time step to the next
    for (int64_t i = 0; i < b_; ++i) {
      const int64_t len = lengths_[i];
      const int64_t col = i * inner_bytes_;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t tp = t + kPrefetchRows;
        if (tp < a_) {
          const char* p = in_m + (tp < len ? len - 1 - tp : tp) * t_step + col;
          for (int64_t k = 0; k < inner_bytes_; k += 64) __builtin_prefetch(p + k);
        }
        const int64_t src_t = t < len ? len - 1 - t : t;
        CopyBytes(out_m + t * t_step + col, in_m + src_t * t_step + col, inner_bytes_, true);
      }
    }
  }
  return t1 - t0;
}

// Layout [outer, seq, mid, batch, inner]: output row t of batch i comes from
// sequence position len_i-1-t (t < len_i) or t. Neighbouring batches with the
// same source position form one contiguous run.
void SequenceReversePlan::GatherUnit(const char* in, char* out, int64_t o, int64_t t) const {
  const int64_t row = b_ * inner_bytes_;
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

}  // namespace tensorops
