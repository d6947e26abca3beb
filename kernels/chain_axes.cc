#include "kernels/chain_axes.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace tensorops {
namespace {

using Kind = DimTransform::Kind;

int64_t Mod(int64_t v, int64_t n) {
  v %= n;
  return v < 0 ? v + n : v;
}

}  // namespace

AxisMap AxisMap::From(const DimTransform& t, int64_t n) {
  if (n <= 1) return {};
  switch (t.kind) {
    case Kind::kCopy:
      return {};
    case Kind::kReverse:
      return {-1, n - 1};
    case Kind::kRoll:
      return {1, Mod(-t.shift, n)};
    case Kind::kReverseRoll:
      return {-1, t.shift};
  }
  return {};
}

DimTransform AxisMap::ToTransform(int64_t n) const {
  if (n <= 1 || identity()) return DimTransform::Copy();
  if (sign == 1) return DimTransform::Roll(Mod(-offset, n));
  return offset == n - 1 ? DimTransform::Reverse() : DimTransform::ReverseRoll(offset);
}

AxisMap AxisMap::Compose(const AxisMap& prev, const AxisMap& next, int64_t n) {
  if (n <= 1) return {};
  return {prev.sign * next.sign, Mod(prev.sign * next.offset + prev.offset, n)};
}

AxisMap AxisMap::Inverse(int64_t n) const {
  if (n <= 1) return {};
  return {sign, Mod(-sign * offset, n)};
}

std::vector<AxisMap> ComposeAxes(const Shape& shape, absl::Span<const Movement> steps) {
  std::vector<AxisMap> maps(shape.size());
  for (const Movement& m : steps) {
    if (m.sequence) continue;
    for (size_t a = 0; a < shape.size(); ++a) {
      maps[a] = AxisMap::Compose(maps[a], AxisMap::From(m.axes[a], shape[a]), shape[a]);
    }
  }
  return maps;
}

std::vector<DimTransform> ToTransforms(const Shape& shape, const std::vector<AxisMap>& maps) {
  std::vector<DimTransform> out(shape.size());
  for (size_t a = 0; a < shape.size(); ++a) out[a] = maps[a].ToTransform(shape[a]);
  return out;
}

ChainAxes::ChainAxes(const Shape& shape, absl::Span<const Movement> steps)
    : shape_(shape),
      coupled_(shape.size(), false),
      batch_(shape.size(), false),
      free_(ComposeAxes(shape, steps)) {
  for (const Movement& m : steps) {
    if (!m.sequence) continue;
    coupled_[m.sequence->batch_axis] = coupled_[m.sequence->seq_axis] = true;
    batch_[m.sequence->batch_axis] = true;
    last_ = std::max({last_, m.sequence->batch_axis, m.sequence->seq_axis});
  }
}

int64_t ChainAxes::first_run_axis() const {
  if (last_ < 0) return 0;
  return batch_[last_] ? last_ + 1 : last_;
}

std::unique_ptr<AxisTransformPlan> ChainAxes::TrailingPlan(int64_t split, int64_t width,
                                                           bool stream) const {
  Shape trailing(shape_.begin() + split + 1, shape_.end());
  std::vector<DimTransform> transforms;
  bool identity = true;
  for (int64_t a = split + 1; a < rank(); ++a) {
    transforms.push_back(free_[a].ToTransform(shape_[a]));
    identity = identity && transforms.back().kind == Kind::kCopy;
  }
  if (identity) return nullptr;
  return std::make_unique<AxisTransformPlan>(trailing, width, transforms, stream);
}

}  // namespace tensorops
