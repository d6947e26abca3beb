#include "server/core/trace.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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

// HTTP's optional whitespace (spaces and tabs) around `text` dropped.
absl::string_view TrimOws(absl::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
// The characters a tracestate key may have after its first.
bool IsKeyChar(char c) {
  return IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// `text` is 1 to `max` key characters, the first one lcalpha (or a digit
// when `digit_first`).
bool IsKeyPart(absl::string_view text, size_t max, bool digit_first) {
  if (text.empty() || text.size() > max) return false;
  if (!IsLcAlpha(text[0]) && !(digit_first && IsDigit(text[0]))) return false;
  return std::all_of(text.begin() + 1, text.end(), IsKeyChar);
}

// key = simple-key / tenant-id "@" system-id (section 3.3.1.3.1).
bool IsTracestateKey(absl::string_view key) {
  const size_t at = key.find('@');
  if (at == absl::string_view::npos) return IsKeyPart(key, 256, false);
  return IsKeyPart(key.substr(0, at), 241, true) && IsKeyPart(key.substr(at + 1), 14, false);
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B /
// %x2D-3C / %x3E-7E (section 3.3.1.3.2).
bool IsTracestateValue(absl::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  return std::all_of(value.begin(), value.end(),
                     [](char c) { return c >= 0x20 && c <= 0x7e && c != ',' && c != '='; });
}

}  // namespace

std::string JoinTracestate(absl::Span<const absl::string_view> values) {
  struct Member {
    absl::string_view text;
    absl::string_view key;
  };
  absl::InlinedVector<Member, 4> members;
  for (absl::string_view value : values) {
    for (absl::string_view raw : absl::StrSplit(value, ',')) {
      const absl::string_view member = TrimOws(raw);
      if (member.empty()) continue;  // "a=1,,b=2" and empty fields are allowed
      const size_t eq = member.find('=');
      if (eq == absl::string_view::npos) return "";
      const absl::string_view key = member.substr(0, eq);
      if (!IsTracestateKey(key) || !IsTracestateValue(member.substr(eq + 1))) return "";
      for (const Member& seen : members) {
        if (seen.key == key) return "";
      }
      if (members.size() == TraceContext::kMaxTracestateMembers) return "";
      members.push_back({member, key});
    }
  }
  auto length = [&members] {
    size_t n = members.empty() ? 0 : members.size() - 1;
    for (const Member& m : members) n += m.text.size();
    return n;
  };
  if (length() > TraceContext::kMaxTracestate) {
    members.erase(std::remove_if(members.begin(), members.end(),
                                 [](const Member& m) { return m.text.size() > 128; }),
                  members.end());
  }
  while (length() > TraceContext::kMaxTracestate) members.pop_back();
  return absl::StrJoin(members, ",", [](std::string* out, const Member& m) {
    out->append(m.text.data(), m.text.size());
  });
}

uint64_t NewSpanId() {
  uint64_t id = 0;
  while (id == 0) id = NextRandom();
  return id;
}

std::optional<TraceParent> ParseTraceparent(absl::string_view text) {
  text = TrimOws(text);
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

TraceContext TraceContext::Start(const TraceFields& fields) {
  TraceContext t;
  char* text = t.text_.data();
  std::optional<TraceParent> parent;
  // Two traceparents cannot both be the parent: neither is (a new trace).
  if (fields.traceparent.size() == 1) parent = ParseTraceparent(fields.traceparent[0]);
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
    if (!fields.tracestate.empty()) t.tracestate_ = JoinTracestate(fields.tracestate);
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

void TraceContext::set_sampled(bool sampled) {
  if (has_parent_) return;
  flags_ = sampled ? 1 : 0;
  text_[54] = kHex[flags_ & 15];
}

bool Sampler::ShouldSample(const TraceContext& trace) const {
  if (parent_based && trace.has_parent()) return trace.sampled();
  switch (root) {
    case Root::kAlwaysOn:
      return true;
    case Root::kAlwaysOff:
      return false;
    case Root::kRatio:
      break;
  }
  if (ratio >= 1.0) return true;
  if (ratio <= 0.0) return false;
  // The trace id's low 8 bytes (its last 16 hex digits) against the bound.
  uint64_t low = 0;
  for (char c : trace.trace_id_hex().substr(16))
    low = low * 16 + static_cast<uint64_t>(HexValue(c));
  return static_cast<double>(low) < ratio * 18446744073709551616.0;
}

absl::StatusOr<Sampler> ParseSampler(absl::string_view name, absl::string_view arg) {
  Sampler sampler;
  absl::string_view root = name.empty() ? "parentbased_always_on" : name;
  sampler.parent_based = absl::ConsumePrefix(&root, "parentbased_");
  if (root == "always_on") {
    sampler.root = Sampler::Root::kAlwaysOn;
  } else if (root == "always_off") {
    sampler.root = Sampler::Root::kAlwaysOff;
  } else if (root == "traceidratio") {
    sampler.root = Sampler::Root::kRatio;
    if (!arg.empty() && (!absl::SimpleAtod(arg, &sampler.ratio) || !(sampler.ratio >= 0.0) ||
                         sampler.ratio > 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("OTEL_TRACES_SAMPLER_ARG=", arg.substr(0, 64),
                                                     ": want a ratio from 0 to 1"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("OTEL_TRACES_SAMPLER=", name.substr(0, 64),
                     ": want always_on, always_off, traceidratio, parentbased_always_on, "
                     "parentbased_always_off or parentbased_traceidratio"));
  }
  return sampler;
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
