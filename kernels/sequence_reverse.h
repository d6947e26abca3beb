// The engine behind both ReverseSequence ops: for each index i along the
// batch axis, reverse the first lengths[i] positions along the sequence axis
// and copy the rest.
//
// The shape is collapsed to [outer, A, mid, B, inner] where A and B are the
// batch and sequence axes in memory order; rows are moved as contiguous runs
// (memcpy forward, ReverseBlocks backward), never element by element with
// div/mod. Outputs past the last-level cache are written with streaming stores;
// time-major ones whose [inner] blocks are whole lines of a 64-byte aligned
// output (the server's big outputs are page-aligned) read the input in order
// and scatter its blocks.
//
// Thread-safety: immutable after construction; RunRange may run concurrently
// on disjoint ranges.
#ifndef TENSOROPS_KERNELS_SEQUENCE_REVERSE_H_
#define TENSOROPS_KERNELS_SEQUENCE_REVERSE_H_

#include <cstdint>
#include <vector>

#include "kernels/kernel_isa.h"
#include "kernels/tensor.h"

namespace tensorops {

class SequenceReversePlan {
 public:
  // Axes normalised and distinct; lengths validated: one per batch index, each
  // in [0, shape[seq_axis]] (0 and 1 both leave a slice unchanged).
  SequenceReversePlan(const Shape& shape, int64_t elem_width, int64_t batch_axis, int64_t seq_axis,
                      std::vector<int64_t> lengths);

  void Run(const void* in, void* out) const { RunRange(in, out, 0, units()); }
  // Writes the output for units [begin, end) of the outer x A index space
  // (output rows; for a time-major output whose blocks are whole cache
  // lines, input rows, scattered: either way disjoint ranges write disjoint
  // bytes and all ranges together write the whole output).
  void RunRange(const void* in, void* out, int64_t begin, int64_t end) const;
  int64_t units() const { return outer_ * a_; }
  // Whether RunRange writes with streaming stores (streaming_store.h); it
  // fences before returning.
  bool streams() const { return stream_; }

 private:
  // RunRange's four layouts, one unit (o, a) each (ColumnBlock: a block of
  // units from (o, a), returning how many it wrote); comments in the .cc.
  void BatchFirstUnit(const char* in, char* out, int64_t o, int64_t a) const;
  void ScatterUnit(const char* in, char* out, int64_t o, int64_t a, KernelIsa isa) const;
  int64_t ColumnBlock(const char* in, char* out, int64_t o, int64_t a, int64_t end) const;
  void GatherUnit(const char* in, char* out, int64_t o, int64_t t) const;

  bool batch_first_;  // A is the batch axis (else A is the sequence axis)
  int64_t outer_ = 1, a_ = 1, mid_ = 1, b_ = 1;
  int64_t inner_bytes_;  // inner dims x element width
  int64_t seq_len_;      // size of the sequence axis
  std::vector<int64_t> lengths_;
  bool stream_ = false;  // output of at least StreamingStoreMinBytes()
};

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_SEQUENCE_REVERSE_H_
