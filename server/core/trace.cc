#include "server/core/trace.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tensorops {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// The value of a lowercase hex digit, -1 for anything else (the spec allows
// no uppercase: "00-4BF9..." is invalid).
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Reads 2 * out.size() lowercase hex digits; false on any other character.
template <size_t N>
bool ReadHex(absl::string_view text, std::array<uint8_t, N>* out) {
  for (size_t i = 0; i < N; ++i) {
    const int hi = HexValue(text[2 * i]);
    const int lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

void WriteHex(const uint8_t* bytes, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
}

void WriteHex64(uint64_t v, char* out) {
  for (int i = 15; i >= 0; --i) {
    out[i] = kHex[v & 15];
    v >>= 4;
  }
}

// xoshiro256** (Blackman and Vigna): four words of state per thread, no
// lock. Seeded by splitmix64 from the OS's entropy, the time and the thread.
class Xoshiro256 {
 public:
  Xoshiro256() {
    std::random_device device;
    uint64_t seed =
        (uint64_t{device()} << 32) ^ device() ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (std::hash<std::thread::id>()(std::this_thread::get_id()) << 1) ^
        static_cast<uint64_t>(getpid());
    for (uint64_t& word : s_) {
      seed += 0x9e3779b97f4a7c15;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
      z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
      word = z ^ (z >> 31);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

uint64_t NextRandom() {
  thread_local Xoshiro256 rng;
  return rng.Next();
}

}  // namespace

uint64_t NewSpanId() {
  uint64_t id = 0;
  while (id == 0) id = NextRandom();
  return id;
}

std::optional<TraceParent> ParseTraceparent(absl::string_view text) {
  if (text.size() < TraceContext::kTraceparentSize) return std::nullopt;
  std::array<uint8_t, 1> version;
  if (!ReadHex(text.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  if (version[0] == 0 && text.size() != TraceContext::kTraceparentSize) return std::nullopt;
  // A later version may append fields, each after a '-'.
  if (text.size() > TraceContext::kTraceparentSize && text[TraceContext::kTraceparentSize] != '-') {
    return std::nullopt;
  }
  if (text[2] != '-' || text[35] != '-' || text[52] != '-') return std::nullopt;
  TraceParent out;
  std::array<uint8_t, 1> flags;
  if (!ReadHex(text.substr(3, 32), &out.trace_id) || !ReadHex(text.substr(36, 16), &out.span_id) ||
      !ReadHex(text.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  if (AllZero(out.trace_id) || AllZero(out.span_id)) return std::nullopt;
  // Version 00 defines one flag (sampled); later versions' other bits are
  // not passed on as 00 (the spec: a server speaking 00 sends 00).
  out.flags = flags[0] & 1;
  return out;
}

TraceContext TraceContext::Start(std::optional<absl::string_view> traceparent,
                                 std::optional<absl::string_view> tracestate) {
  TraceContext t;
  char* text = t.text_.data();
  std::optional<TraceParent> parent;
  if (traceparent.has_value()) parent = ParseTraceparent(*traceparent);
  text[0] = '0';
  text[1] = '0';
  text[2] = '-';
  if (parent.has_value()) {
    WriteHex(parent->trace_id.data(), 16, text + 3);
    WriteHex(parent->span_id.data(), 8, t.parent_hex_.data());
    t.has_parent_ = true;
    t.flags_ = parent->flags;
    // tracestate belongs to a traceparent: without a valid one it is dropped
    // (the spec, section 3.3.1.1).
    if (tracestate.has_value() && tracestate->size() <= kMaxTracestate) {
      t.tracestate_ = std::string(*tracestate);
    }
  } else {
    uint64_t hi = 0;
    uint64_t lo = 0;
    while (hi == 0 && lo == 0) {
      hi = NextRandom();
      lo = NextRandom();
    }
    WriteHex64(hi, text + 3);
    WriteHex64(lo, text + 19);
    t.flags_ = 1;  // a trace this server starts is recorded (sampled)
  }
  text[35] = '-';
  WriteHex64(NewSpanId(), text + 36);
  text[52] = '-';
  text[53] = kHex[t.flags_ >> 4];
  text[54] = kHex[t.flags_ & 15];
  return t;
}

std::string RenderServerTiming(const ServerTiming& timing) {
  // Integer arithmetic into one reserved string: no printf of doubles on
  // every call's reply.
  std::string out;
  out.reserve(96);
  auto stage = [&out](absl::string_view name, absl::Duration d) {
    const int64_t us = std::max<int64_t>(0, absl::ToInt64Microseconds(d));
    absl::StrAppend(&out, out.empty() ? "" : ", ", name, ";dur=", us / 1000, ".",
                    absl::Dec(us % 1000, absl::kZeroPad3));
  };
  if (timing.queue.has_value()) stage("queue", *timing.queue);
  if (timing.kernel.has_value()) stage("kernel", *timing.kernel);
  stage("total", timing.total);
  return out;
}

}  // namespace tensorops
