// The cases of the W3C Trace Context test suite (w3c/trace-context,
// test/test.py: what a server must do with the traceparent and tracestate
// headers it is sent), one row each, against TraceContext::Start. Written
// from the spec's text (https://www.w3.org/TR/trace-context/, sections 3.2
// and 3.3) and the suite's case list; header names' case is the door's
// business (HTTP fields are looked up case-insensitively, gRPC metadata
// keys are lowercase) and is covered by the e2e trace test.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/core/trace.h"

namespace tensorops {
namespace {

constexpr char kId[] = "12345678901234567890123456789012";
constexpr char kTp[] = "00-12345678901234567890123456789012-1234567890123456-01";
constexpr char kTpQuiet[] = "00-12345678901234567890123456789012-1234567890123456-00";

struct Case {
  const char* name;
  std::vector<std::string> traceparent;
  std::vector<std::string> tracestate;
  bool keeps_trace;            // the caller's trace id is kept (else a new trace)
  std::string tracestate_out;  // what the call passes on
};

TraceFields FieldsOf(const Case& c) {
  TraceFields f;
  for (const std::string& v : c.traceparent) f.traceparent.push_back(v);
  for (const std::string& v : c.tracestate) f.tracestate.push_back(v);
  return f;
}

std::string Members(int first, int last) {
  std::vector<std::string> out;
  for (int i = first; i <= last; ++i) out.push_back(absl::StrCat("bar", i, "=", i));
  return absl::StrJoin(out, ",");
}

// Every character the grammar allows in a key without and with a vendor,
// and in a value.
const std::string kAllKey = "abcdefghijklmnopqrstuvwxyz0123456789_-*/";
std::string AllValue() {
  std::string v;
  for (char c = 0x20; c <= 0x7e; ++c) {
    if (c != ',' && c != '=') v.push_back(c);
  }
  return v;
}

std::vector<Case> Cases() {
  const std::string tp(kTp);
  const std::string q(kTpQuiet);
  return {
      // traceparent
      {"both missing", {}, {}, false, ""},
      {"traceparent only", {tp}, {}, true, ""},
      {"traceparent duplicated",
       {"00-12345678901234567890123456789011-1234567890123456-01", tp},
       {},
       false,
       ""},
      {"version 00 with a trailing '.'", {tp + "."}, {}, false, ""},
      {"version 00 with more fields", {tp + "-what-the-future-will-be-like"}, {}, false, ""},
      {"future version cc", {"cc-" + tp.substr(3)}, {}, true, ""},
      {"future version cc, more fields",
       {"cc-" + tp.substr(3) + "-what-the-future-will-be-like"},
       {},
       true,
       ""},
      {"future version cc, bad separator",
       {"cc-" + tp.substr(3) + ".what-the-future-will-be-like"},
       {},
       false,
       ""},
      {"version ff", {"ff-" + tp.substr(3)}, {}, false, ""},
      {"version '.0'", {".0-" + tp.substr(3)}, {}, false, ""},
      {"version '0.'", {"0.-" + tp.substr(3)}, {}, false, ""},
      {"version too long (3)", {"000-" + tp.substr(3)}, {}, false, ""},
      {"version too long (4)", {"0000-" + tp.substr(3)}, {}, false, ""},
      {"version too short", {"0-" + tp.substr(3)}, {}, false, ""},
      {"trace id all zero",
       {"00-00000000000000000000000000000000-1234567890123456-01"},
       {},
       false,
       ""},
      {"trace id '.' first",
       {"00-.2345678901234567890123456789012-1234567890123456-01"},
       {},
       false,
       ""},
      {"trace id '.' last",
       {"00-1234567890123456789012345678901.-1234567890123456-01"},
       {},
       false,
       ""},
      {"trace id too long",
       {"00-123456789012345678901234567890123-1234567890123456-01"},
       {},
       false,
       ""},
      {"trace id too short",
       {"00-1234567890123456789012345678901-1234567890123456-01"},
       {},
       false,
       ""},
      {"parent id all zero", {"00-" + std::string(kId) + "-0000000000000000-01"}, {}, false, ""},
      {"parent id '.' first", {"00-" + std::string(kId) + "-.234567890123456-01"}, {}, false, ""},
      {"parent id '.' last", {"00-" + std::string(kId) + "-123456789012345.-01"}, {}, false, ""},
      {"parent id too long", {"00-" + std::string(kId) + "-12345678901234567-01"}, {}, false, ""},
      {"parent id too short", {"00-" + std::string(kId) + "-123456789012345-01"}, {}, false, ""},
      {"flags '.0'", {tp.substr(0, 53) + ".0"}, {}, false, ""},
      {"flags '0.'", {tp.substr(0, 53) + "0."}, {}, false, ""},
      {"flags too long", {tp.substr(0, 53) + "001"}, {}, false, ""},
      {"flags too short", {tp.substr(0, 53) + "1"}, {}, false, ""},
      {"OWS: leading space", {" " + tp}, {}, true, ""},
      {"OWS: leading tab", {"\t" + tp}, {}, true, ""},
      {"OWS: trailing space", {tp + " "}, {}, true, ""},
      {"OWS: trailing tab", {tp + "\t"}, {}, true, ""},
      {"OWS: both", {"\t " + tp + " \t"}, {}, true, ""},
      // tracestate
      {"tracestate without traceparent", {}, {"foo=1,bar=2"}, false, ""},
      {"tracestate with traceparent", {q}, {"foo=1,bar=2"}, true, "foo=1,bar=2"},
      {"empty tracestate", {q}, {""}, true, ""},
      {"empty then foo", {q}, {"", "foo=1"}, true, "foo=1"},
      {"foo then empty", {q}, {"foo=1", ""}, true, "foo=1"},
      {"several headers joined in order",
       {q},
       {"foo=1,bar=2", "rojo=1,congo=2", "baz=3"},
       true,
       "foo=1,bar=2,rojo=1,congo=2,baz=3"},
      {"duplicated key in one header", {q}, {"foo=1,foo=1"}, true, ""},
      {"duplicated key, other value", {q}, {"foo=1,foo=2"}, true, ""},
      {"duplicated key across headers", {q}, {"foo=1", "foo=1"}, true, ""},
      {"duplicated key across headers, other value", {q}, {"foo=1", "foo=2"}, true, ""},
      {"all allowed characters",
       {q},
       {kAllKey + "=" + AllValue()},
       true,
       kAllKey + "=" + AllValue()},
      {"all allowed characters, vendor key",
       {q},
       {kAllKey + "@a-z0-9_-*/=1"},
       true,
       kAllKey + "@a-z0-9_-*/=1"},
      {"OWS around members", {q}, {"foo=1 \t , \t bar=2, \t baz=3"}, true, "foo=1,bar=2,baz=3"},
      {"OWS tabs around members",
       {q},
       {"foo=1\t \t,\t \tbar=2,\t \tbaz=3"},
       true,
       "foo=1,bar=2,baz=3"},
      {"OWS leading space", {q}, {" foo=1"}, true, "foo=1"},
      {"OWS leading tab", {q}, {"\tfoo=1"}, true, "foo=1"},
      {"OWS trailing space", {q}, {"foo=1 "}, true, "foo=1"},
      {"OWS trailing tab", {q}, {"foo=1\t"}, true, "foo=1"},
      {"OWS both", {q}, {"\t foo=1 \t"}, true, "foo=1"},
      {"key with a space", {q}, {"foo =1"}, true, ""},
      {"key uppercase", {q}, {"FOO=1"}, true, ""},
      {"key with a '.'", {q}, {"foo.bar=1"}, true, ""},
      {"vendor key empty system", {q}, {"foo@=1,bar=2"}, true, ""},
      {"vendor key empty tenant", {q}, {"@foo=1,bar=2"}, true, ""},
      {"vendor key '@@'", {q}, {"foo@@bar=1,bar=2"}, true, ""},
      {"vendor key two '@'", {q}, {"foo@bar@baz=1,bar=2"}, true, ""},
      {"32 members kept",
       {q},
       {Members(1, 10), Members(11, 20), Members(21, 30), Members(31, 32)},
       true,
       Members(1, 32)},
      {"33 members dropped",
       {q},
       {Members(1, 10), Members(11, 20), Members(21, 30), Members(31, 33)},
       true,
       ""},
      {"key of 256",
       {q},
       {"foo=1", std::string(256, 'z') + "=1"},
       true,
       "foo=1," + std::string(256, 'z') + "=1"},
      {"key of 257", {q}, {"foo=1", std::string(257, 'z') + "=1"}, true, ""},
      {"tenant 241, system 14",
       {q},
       {"foo=1", std::string(241, 't') + "@" + std::string(14, 'v') + "=1"},
       true,
       "foo=1," + std::string(241, 't') + "@" + std::string(14, 'v') + "=1"},
      {"tenant 242", {q}, {"foo=1", std::string(242, 't') + "@v=1"}, true, ""},
      {"system 15", {q}, {"foo=1", "t@" + std::string(15, 'v') + "=1"}, true, ""},
      {"value with '='", {q}, {"foo=bar=baz"}, true, ""},
      {"empty value", {q}, {"foo=,bar=3"}, true, ""},
      // The spec's other rules: no '=' at all; a value of 257 characters.
      {"member without '='", {q}, {"foo"}, true, ""},
      {"value of 257", {q}, {"foo=" + std::string(257, 'v')}, true, ""},
      {"value of 256", {q}, {"foo=" + std::string(256, 'v')}, true, "foo=" + std::string(256, 'v')},
      // Over 512 characters: members over 128 characters go first.
      {"over 512: long members go first",
       {q},
       {"a=1,b=" + std::string(200, 'x') + ",c=" + std::string(200, 'y') +
        ",d=" + std::string(120, 'z')},
       true,
       "a=1,d=" + std::string(120, 'z')},
  };
}

TEST(TraceW3cTest, TheSuitesCases) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const TraceContext t = TraceContext::Start(FieldsOf(c));
    // Always a valid traceparent back, and a span of its own.
    EXPECT_TRUE(ParseTraceparent(t.traceparent()).has_value()) << t.traceparent();
    EXPECT_NE(t.span_id_hex(), "1234567890123456");
    EXPECT_EQ(t.trace_id_hex() == kId, c.keeps_trace) << t.traceparent();
    EXPECT_EQ(t.has_parent(), c.keeps_trace);
    EXPECT_EQ(t.tracestate(), c.tracestate_out);
  }
}

TEST(TraceW3cTest, OverLengthDropsFromTheEndAfterLongMembers) {
  // 5 members of 120 characters: 604 with commas; the last one goes.
  std::vector<std::string> members;
  for (char k = 'a'; k <= 'e'; ++k)
    members.push_back(std::string(1, k) + "=" + std::string(118, 'v'));
  const std::string joined = absl::StrJoin(members, ",");
  const std::string kept = JoinTracestate({joined});
  EXPECT_LE(kept.size(), TraceContext::kMaxTracestate);
  members.pop_back();
  EXPECT_EQ(kept, absl::StrJoin(members, ","));
}

TEST(TraceW3cTest, ANewTracesSamplingIsTheSamplers) {
  TraceContext root = TraceContext::Start(TraceFields());
  EXPECT_TRUE(root.sampled());
  root.set_sampled(false);
  EXPECT_FALSE(root.sampled());
  EXPECT_EQ(root.traceparent().substr(53), "00");
  EXPECT_FALSE(root.caller_sampled());
  // A child keeps its caller's decision (parent-based).
  TraceFields fields;
  fields.traceparent.push_back(kTp);
  TraceContext child = TraceContext::Start(fields);
  child.set_sampled(false);
  EXPECT_TRUE(child.sampled());
  EXPECT_TRUE(child.caller_sampled());
}

}  // namespace
}  // namespace tensorops
