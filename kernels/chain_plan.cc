#include "kernels/chain_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kernels/chain_axes.h"
#include "kernels/sequence_reverse.h"
#include "kernels/streaming_store.h"
#include "kernels/strided_copy.h"

namespace tensorops {
namespace {

// Output positions [out, out + count) of one row read input positions
// x, x + dir, x + 2 dir, ...
struct Run {
  int64_t out;
  int64_t x;
  int64_t count;
  int64_t dir;
};
using Runs = absl::InlinedVector<Run, 8>;

// Runs read through an axis map: each run splits at most where it wraps,
// and only one run can contain the wrap, so a step adds at most one run.
void MapRuns(const AxisMap& m, int64_t n, Runs* runs, Runs* tmp) {
  tmp->clear();
  for (const Run& r : *runs) {
    const int64_t y = m.Apply(r.x, n);
    const int64_t dir = m.sign * r.dir;
    const int64_t first = dir > 0 ? std::min(r.count, n - y) : std::min(r.count, y + 1);
    tmp->push_back({r.out, y, first, dir});
    if (first < r.count) {
      tmp->push_back({r.out + first, dir > 0 ? 0 : n - 1, r.count - first, dir});
    }
  }
  std::swap(*runs, *tmp);
}

// Runs read through a reversal of positions [0, len): one split at len.
void ReversePrefixRuns(int64_t len, Runs* runs, Runs* tmp) {
  tmp->clear();
  for (const Run& r : *runs) {
    if (r.dir > 0) {
      const int64_t a = std::clamp<int64_t>(len - r.x, 0, r.count);  // positions < len
      if (a > 0) tmp->push_back({r.out, len - 1 - r.x, a, -1});
      if (a < r.count) tmp->push_back({r.out + a, r.x + a, r.count - a, 1});
    } else {
      const int64_t b = std::clamp<int64_t>(r.x - len + 1, 0, r.count);  // positions >= len
      if (b > 0) tmp->push_back({r.out, r.x, b, -1});
      if (b < r.count) tmp->push_back({r.out + b, len - 1 - (r.x - b), r.count - b, 1});
    }
  }
  std::swap(*runs, *tmp);
}

// Neighbouring runs that continue each other become one (a Roll undone by
// another leaves two such).
void MergeRuns(Runs* runs) {
  size_t w = 0;
  for (size_t i = 0; i < runs->size(); ++i) {
    Run r = (*runs)[i];
    if (r.count == 1) r.dir = 1;
    if (w > 0) {
      Run& last = (*runs)[w - 1];
      if (last.count == 1 && r.out == last.out + 1 && (r.x == last.x + 1 || r.x == last.x - 1)) {
        last.dir = r.x - last.x;
      }
      if (last.out + last.count == r.out && last.x + last.dir * last.count == r.x &&
          (r.count == 1 || r.dir == last.dir)) {
        last.count += r.count;
        continue;
      }
    }
    (*runs)[w++] = r;
  }
  runs->resize(w);
}

bool AnySequence(absl::Span<const Movement> steps) {
  for (const Movement& m : steps) {
    if (m.sequence.has_value()) return true;
  }
  return false;
}

// A chain with ReverseSequences, walked in rows (see chain_plan.h).
class FusedChainPlan {
 public:
  FusedChainPlan(const Shape& shape, int64_t width, absl::Span<const Movement> steps) {
    const ChainAxes axes(shape, steps);
    const int64_t rank = axes.rank();
    const int64_t last = axes.last_coupled();
    const int64_t rows = axes.first_run_axis();  // leading dims walked row by row
    has_piece_ = rows == last;
    piece_n_ = has_piece_ ? shape[last] : 1;
    // The dims after `last`: one block per row position, by the composed plan.
    int64_t inner_elems = 1;
    for (int64_t a = last + 1; a < rank; ++a) inner_elems *= shape[a];
    block_ = inner_elems * width;
    row_bytes_ = piece_n_ * block_;
    int64_t total = row_bytes_;
    for (int64_t a = 0; a < rows; ++a) total *= shape[a];
    stream_ = total >= StreamingStoreMinBytes();
    inner_ = axes.TrailingPlan(last, width, stream_);
    // Row dims: sizes, strides, free maps.
    size_.assign(shape.begin(), shape.begin() + rows);
    stride_.resize(rows);
    int64_t stride = row_bytes_;
    for (int64_t a = rows; a-- > 0;) {
      stride_[a] = stride;
      stride *= shape[a];
    }
    free_.resize(rows);
    coupled_row_.resize(rows);
    for (int64_t a = 0; a < rows; ++a) {
      coupled_row_[a] = axes.coupled(a);
      free_[a] = axes.coupled(a) ? AxisMap{} : axes.free_map(a);
    }
    // The steps along coupled axes, in chain order (run last to first).
    for (const Movement& m : steps) {
      Step s;
      if (m.sequence) {
        s.batch = m.sequence->batch_axis;
        s.seq = m.sequence->seq_axis == last && has_piece_ ? -1 : m.sequence->seq_axis;
        s.lengths = m.sequence->lengths;
        for (int64_t& len : s.lengths) {
          if (len <= 1) len = 0;  // reverses nothing
        }
      } else {
        for (int64_t a = 0; a < rank; ++a) {
          if (!axes.coupled(a)) continue;
          const AxisMap map = AxisMap::From(m.axes[a], shape[a]);
          if (map.identity()) continue;
          if (has_piece_ && a == last) {
            s.piece_map = true;
            s.piece = map;
          } else {
            s.maps.push_back({a, map});
          }
        }
        if (s.maps.empty() && !s.piece_map) continue;
      }
      steps_.push_back(std::move(s));
    }
  }

  int64_t units() const {
    int64_t n = 1;
    for (int64_t d : size_) n *= d;
    return n;
  }
  int64_t row_bytes() const { return row_bytes_; }

  void RunRange(const char* in, char* out, int64_t begin, int64_t end) const {
    if (begin >= end) return;
    const int64_t rows = static_cast<int64_t>(size_.size());
    absl::InlinedVector<int64_t, 8> pos(rows), idx(rows);
    for (int64_t a = rows, u = begin; a-- > 0;) {
      pos[a] = u % size_[a];
      u /= size_[a];
    }
    Runs runs, tmp;
    for (int64_t u = begin; u < end; ++u) {
      for (int64_t a = 0; a < rows; ++a) {
        idx[a] = coupled_row_[a] ? pos[a] : free_[a].Apply(pos[a], size_[a]);
      }
      runs.assign({Run{0, 0, piece_n_, 1}});
      for (size_t k = steps_.size(); k-- > 0;) {
        const Step& s = steps_[k];
        if (s.batch < 0) {
          for (const auto& [a, map] : s.maps) idx[a] = map.Apply(idx[a], size_[a]);
          if (s.piece_map) MapRuns(s.piece, piece_n_, &runs, &tmp);
          continue;
        }
        const int64_t len = s.lengths[idx[s.batch]];
        if (len == 0) continue;
        if (s.seq >= 0) {
          if (idx[s.seq] < len) idx[s.seq] = len - 1 - idx[s.seq];
        } else {
          ReversePrefixRuns(len, &runs, &tmp);
        }
      }
      int64_t in_off = 0;
      for (int64_t a = 0; a < rows; ++a) in_off += idx[a] * stride_[a];
      CopyRow(in + in_off, out + u * row_bytes_, &runs);
      // Next output row.
      for (int64_t a = rows; a-- > 0;) {
        if (++pos[a] < size_[a]) break;
        pos[a] = 0;
      }
    }
    // Another thread may read the output next: publish the streaming stores.
    if (stream_) StreamFence();
  }

 private:
  struct Step {
    int64_t batch = -1;  // >= 0: a ReverseSequence
    int64_t seq = -1;    // its sequence axis, or -1 when that is the row's piece axis
    std::vector<int64_t> lengths;
    absl::InlinedVector<std::pair<int64_t, AxisMap>, 2> maps;  // coupled row axes
    bool piece_map = false;
    AxisMap piece;
  };

  void CopyRow(const char* src, char* dst, Runs* runs) const {
    if (runs->size() > 1) MergeRuns(runs);
    for (const Run& r : *runs) {
      char* d = dst + r.out * block_;
      if (inner_ != nullptr) {
        // The run's blocks in one call per run of the inner plan (a call per
        // block cost more than its bytes: 8-op chain with a sequence, UINT8
        // 16 MiB, blocks of 256 B).
        inner_->RunRowsUnfenced(src + r.x * block_, r.dir * block_, d, block_, r.count);
      } else if (r.dir > 0) {
        CopyBytes(d, src + r.x * block_, r.count * block_, stream_);
      } else {
        ReverseBlocks(d, src + (r.x - r.count + 1) * block_, r.count, block_, stream_);
      }
    }
  }

  bool has_piece_ = false;
  int64_t piece_n_ = 1;  // positions along the piece axis (1 without one)
  int64_t block_ = 0;    // bytes per position of the piece axis (the inner dims)
  int64_t row_bytes_ = 0;
  bool stream_ = false;
  std::unique_ptr<AxisTransformPlan> inner_;  // null: the inner dims are copied
  std::vector<int64_t> size_, stride_;
  std::vector<bool> coupled_row_;
  std::vector<AxisMap> free_;
  std::vector<Step> steps_;
};

// The passes of a chain that is not fused: runs of Reverse/Roll steps
// composed into one AxisTransformPlan each, each ReverseSequence its own.
std::vector<PreparedOp::Pass> Passes(const Shape& shape, int64_t width,
                                     absl::Span<const Movement> steps) {
  std::vector<PreparedOp::Pass> passes;
  size_t i = 0;
  while (i < steps.size()) {
    if (steps[i].sequence) {
      const Movement::Sequence& s = *steps[i].sequence;
      auto plan =
          std::make_shared<SequenceReversePlan>(shape, width, s.batch_axis, s.seq_axis, s.lengths);
      passes.push_back({plan->units(), [plan](const void* in, void* out, int64_t b, int64_t e) {
                          plan->RunRange(in, out, b, e);
                        }});
      ++i;
      continue;
    }
    size_t j = i;
    while (j < steps.size() && !steps[j].sequence) ++j;
    auto plan = std::make_shared<AxisTransformPlan>(
        shape, width, ToTransforms(shape, ComposeAxes(shape, steps.subspan(i, j - i))));
    passes.push_back({plan->outer_size(), [plan](const void* in, void* out, int64_t b, int64_t e) {
                        plan->RunRange(in, out, b, e);
                      }});
    i = j;
  }
  return passes;
}

bool Fusable(const Shape& shape, int64_t width, absl::Span<const Movement> steps) {
  return !AnySequence(steps) ||
         FusedChainPlan(shape, width, steps).row_bytes() >= kFusedMinRowBytes;
}

// A rank-0 tensor as one of shape [1] (a Movement of it has no axes).
std::vector<Movement> WithOneAxis(absl::Span<const Movement> steps) {
  std::vector<Movement> out(steps.begin(), steps.end());
  for (Movement& m : out) {
    if (!m.sequence) m.axes = {DimTransform::Copy()};
  }
  return out;
}

}  // namespace

// One step of the chain as the flow plan undoes it.
struct FlowPlan::Step {
  int64_t batch = -1;  // >= 0: a ReverseSequence (batch < split_)
  int64_t seq = -1;    // its sequence axis (<= split_; == split_: the run axis)
  std::vector<int64_t> lengths;
  std::vector<AxisMap> prefix_inv;  // Reverse/Roll: per row dim
  AxisMap run_inv;                  // and along the run axis
};

FlowPlan::~FlowPlan() = default;

std::unique_ptr<FlowPlan> FlowPlan::Make(DType dtype, const Shape& shape,
                                         absl::Span<const Movement> steps, int64_t max_block_bytes,
                                         int64_t min_row_bytes) {
  if (shape.empty()) {
    const std::vector<Movement> padded = WithOneAxis(steps);
    return Make(dtype, Shape{1}, padded, max_block_bytes, min_row_bytes);
  }
  const ChainAxes axes(shape, steps);
  const int64_t rank = axes.rank();
  std::unique_ptr<FlowPlan> plan(new FlowPlan());
  plan->width_ = ElementWidth(dtype);
  // The run axis: the outermost one whose blocks fit max_block_bytes, but
  // never before the first one a row may run along (a batch axis must index
  // the row: its lengths are per row).
  int64_t d = rank - 1;
  for (int64_t blk = plan->width_; d > 0 && blk * shape[d] <= max_block_bytes; --d) {
    blk *= shape[d];
  }
  const int64_t d_min = axes.first_run_axis();
  if (d_min >= rank) return nullptr;    // rows of one element
  const bool coupled_rows = d_min > d;  // the coupling, not the block size, sets the rows
  d = std::max(d, d_min);
  plan->split_ = d;
  plan->row_n_ = shape[d];
  plan->block_ = plan->width_;
  for (int64_t a = d + 1; a < rank; ++a) plan->block_ *= shape[a];
  if (coupled_rows && plan->row_n_ * plan->block_ < min_row_bytes) return nullptr;
  plan->prefix_.assign(shape.begin(), shape.begin() + d);
  // The trailing dims are free: every step's map along them, composed once.
  plan->inner_ = axes.TrailingPlan(d, plan->width_, /*stream=*/false);
  for (const Movement& m : steps) {
    Step s;
    if (m.sequence) {
      s.batch = m.sequence->batch_axis;
      s.seq = m.sequence->seq_axis;
      s.lengths = m.sequence->lengths;
      for (int64_t& len : s.lengths) {
        if (len <= 1) len = 0;  // reverses nothing
      }
    } else {
      bool identity = true;
      for (int64_t a = 0; a <= d; ++a) {
        const AxisMap inv = AxisMap::From(m.axes[a], shape[a]).Inverse(shape[a]);
        identity = identity && inv.identity();
        if (a < d) {
          s.prefix_inv.push_back(inv);
        } else {
          s.run_inv = inv;
        }
      }
      if (identity) continue;
    }
    plan->steps_.push_back(std::move(s));
  }
  return plan;
}

void FlowPlan::Map(int64_t first, int64_t count, std::vector<Piece>* pieces) const {
  const int64_t rows = static_cast<int64_t>(prefix_.size());
  const int64_t row = first / row_n_;
  absl::InlinedVector<int64_t, 8> idx(rows);
  for (int64_t a = rows, u = row; a-- > 0;) {
    idx[a] = u % prefix_[a];
    u /= prefix_[a];
  }
  // Runs {out: input position, x: output position}: the input positions
  // carried through each step's inverse, first step first.
  Runs runs, tmp;
  const int64_t x0 = first % row_n_;
  runs.assign({Run{x0, x0, count, 1}});
  for (const Step& s : steps_) {
    if (s.batch >= 0) {
      const int64_t len = s.lengths[idx[s.batch]];
      if (len == 0) continue;
      if (s.seq < split_) {
        if (idx[s.seq] < len) idx[s.seq] = len - 1 - idx[s.seq];
      } else {
        ReversePrefixRuns(len, &runs, &tmp);
      }
      continue;
    }
    for (int64_t a = 0; a < rows; ++a) idx[a] = s.prefix_inv[a].Apply(idx[a], prefix_[a]);
    if (!s.run_inv.identity()) MapRuns(s.run_inv, row_n_, &runs, &tmp);
  }
  int64_t out_row = 0;
  for (int64_t a = 0; a < rows; ++a) out_row = out_row * prefix_[a] + idx[a];
  if (runs.size() > 1) MergeRuns(&runs);
  for (const Run& r : runs) {
    Piece p;
    p.in_block = row * row_n_ + r.out;
    p.count = r.count;
    p.reversed = r.dir < 0 && r.count > 1;
    p.out_block = out_row * row_n_ + (p.reversed ? r.x - r.count + 1 : r.x);
    pieces->push_back(p);
  }
}

void FlowPlan::Move(const Piece& p, const char* in, char* out) const {
  if (inner_ != nullptr) {
    if (p.reversed) {
      inner_->RunRowsUnfenced(in + (p.count - 1) * block_, -block_, out, block_, p.count);
    } else {
      inner_->RunRowsUnfenced(in, block_, out, block_, p.count);
    }
  } else if (p.reversed) {
    ReverseBlocks(out, in, p.count, block_);
  } else {
    std::memcpy(out, in, static_cast<size_t>(p.count * block_));
  }
}

PreparedOp PlanMovements(DType dtype, const Shape& shape, const void* in,
                         absl::Span<const Movement> steps) {
  const int64_t width = ElementWidth(dtype);
  PreparedOp op;
  op.dtype = dtype;
  op.shape = shape;
  if (NumElements(shape) == 0) {
    op.units = 0;
    op.run_range = [](void*, int64_t, int64_t) {};
    return op;
  }
  if (steps.size() == 1 && steps[0].sequence) {
    const Movement::Sequence& s = *steps[0].sequence;
    auto plan =
        std::make_shared<SequenceReversePlan>(shape, width, s.batch_axis, s.seq_axis, s.lengths);
    op.units = plan->units();
    op.run_range = [plan, in](void* out, int64_t b, int64_t e) { plan->RunRange(in, out, b, e); };
    return op;
  }
  if (!AnySequence(steps)) {
    auto plan = std::make_shared<AxisTransformPlan>(shape, width,
                                                    ToTransforms(shape, ComposeAxes(shape, steps)));
    op.units = plan->outer_size();
    op.run_range = [plan, in](void* out, int64_t b, int64_t e) { plan->RunRange(in, out, b, e); };
    return op;
  }
  auto fused = std::make_shared<FusedChainPlan>(shape, width, steps);
  if (fused->row_bytes() >= kFusedMinRowBytes) {
    op.units = fused->units();
    op.run_range = [fused, in](void* out, int64_t b, int64_t e) {
      fused->RunRange(static_cast<const char*>(in), static_cast<char*>(out), b, e);
    };
    return op;
  }
  std::vector<PreparedOp::Pass> passes = Passes(shape, width, steps);
  PreparedOp::Pass first = std::move(passes.front());
  op.units = first.units;
  op.run_range = [run = std::move(first.run_range), in](void* out, int64_t b, int64_t e) {
    run(in, out, b, e);
  };
  op.then.assign(std::make_move_iterator(passes.begin() + 1),
                 std::make_move_iterator(passes.end()));
  return op;
}

int64_t PlannedPasses(DType dtype, const Shape& shape, absl::Span<const Movement> steps) {
  if (NumElements(shape) == 0 || steps.size() <= 1) return 1;
  const int64_t width = ElementWidth(dtype);
  if (Fusable(shape, width, steps)) return 1;
  return static_cast<int64_t>(Passes(shape, width, steps).size());
}

}  // namespace tensorops
