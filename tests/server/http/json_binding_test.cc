// The HTTP/JSON binding's request parser and answer encoder, without a
// server: inputs' data taken in either order of fields (converted on the fly
// when datatype and shape come first, kept as elements otherwise), nested
// and scalar data, every element error naming its index, and numeric output
// text that reads back to the same bits.
#include "server/http/json_binding.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http/oip_json.h"

namespace tensorops {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<JsonInferRequest>> Parse(const std::string& body,
                                                        RequestLimits limits = {}) {
  return JsonInferRequest::Parse(body, std::nullopt, "Roll", "", limits);
}

template <typename T>
std::vector<T> Raw(const JsonInferRequest& r, size_t input) {
  const absl::string_view raw = r.request().raw_inputs[input];
  std::vector<T> out(raw.size() / sizeof(T));
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

// One input named "data" with these fields, in this order.
std::string Body(const std::string& fields) {
  return R"({"inputs": [{"name": "data", )" + fields + "}]}";
}

TEST(JsonBindingTest, DataBeforeOrAfterDatatypeAndShapeGivesTheSameBytes) {
  for (const std::string& fields :
       {std::string(R"("datatype": "FP32", "shape": [2, 2], "data": [1.5, -0.0, 3, 1e-45])"),
        std::string(R"("data": [1.5, -0.0, 3, 1e-45], "shape": [2, 2], "datatype": "FP32")"),
        std::string(R"("shape": [2, 2], "data": [[1.5, -0.0], [3, 1e-45]], "datatype": "FP32")"),
        std::string(
            R"("datatype": "FP32", "shape": [2, 2], "data": [[1.5], [[-0.0, 3]], 1e-45])")}) {
    SCOPED_TRACE(fields);
    auto r = Parse(Body(fields));
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<float> v = Raw<float>(**r, 0);
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v[0], 1.5f);
    EXPECT_TRUE(v[1] == 0 && std::signbit(v[1]));
    EXPECT_EQ(v[2], 3.0f);
    EXPECT_EQ(v[3], std::numeric_limits<float>::denorm_min());
  }
}

TEST(JsonBindingTest, IntegersExactOver64Bits) {
  for (const char* order : {"first", "last"}) {
    SCOPED_TRACE(order);
    const std::string data = R"("data": [-9223372036854775808, 9223372036854775807, 0])";
    const std::string meta = R"("datatype": "INT64", "shape": [3])";
    auto r = Parse(Body(std::string(order) == "first" ? meta + ", " + data : data + ", " + meta));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Raw<int64_t>(**r, 0), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                          std::numeric_limits<int64_t>::max(), 0}));
  }
  auto u = Parse(Body(R"("datatype": "UINT64", "shape": [2], "data": [18446744073709551615, 1])"));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(Raw<uint64_t>(**u, 0), (std::vector<uint64_t>{~uint64_t{0}, 1}));
}

// Plain numbers in captured data are read past RapidJSON's tokenizer
// (FastNumbers); what JSON's grammar refuses must still be refused there, and
// every value must be the one RapidJSON gives.
TEST(JsonBindingTest, NumberRunsKeepJsonGrammarAndValues) {
  struct Case {
    const char* datatype;
    const char* data;
    bool ok;
    const char* error;  // a part of the error when !ok
  };
  const Case cases[] = {
      {"INT32", "[1 2]", false, "malformed JSON"},
      {"INT32", "[1,]", false, "malformed JSON"},
      {"INT32", "[1,,2]", false, "malformed JSON"},
      {"INT32", "[01, 2]", false, "malformed JSON"},
      {"INT32", "[+1, 2]", false, "malformed JSON"},
      {"FP32", "[.5, 2]", false, "malformed JSON"},
      {"FP32", "[1., 2]", false, "malformed JSON"},
      {"FP32", "[1e, 2]", false, "malformed JSON"},
      {"FP32", "[1, 2", false, "malformed JSON"},
      {"FP64", "[1e400, 2]", false, "malformed JSON"},
      {"INT32", "[1.5, 2]", false, "integer"},
      {"INT32", "[2147483648, 2]", false, "out of range"},
      {"INT32", "[1, \"x\"]", false, "data[1]"},
      {"INT32", "[1, 2, 3]", false, "input 'data'"},
      {"INT32", " [ 1 ,\n2\t] ", true, ""},
      {"INT32", "[[1], [2]]", true, ""},
      {"FP32", "[1, NaN]", true, ""},
      {"FP32", "[-Infinity, Inf]", true, ""},
      // RapidJSON 1.1.0 reads out of bounds on these (refused before it).
      {"FP32", "[NaNe1, 2]", false, "NaN and Infinity take no fraction"},
      {"FP32", "[1, -InfinityE2]", false, "NaN and Infinity take no fraction"},
      {"FP32", "[Inf.5, 2]", false, "NaN and Infinity take no fraction"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.datatype) + " " + c.data);
    auto r = Parse(Body(std::string(R"("datatype": ")") + c.datatype +
                        R"(", "shape": [2], "data": )" + c.data));
    ASSERT_EQ(r.ok(), c.ok) << (r.ok() ? "ok" : r.status().ToString());
    if (!c.ok) EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
  auto ints = Parse(Body(R"("datatype": "INT32", "shape": [2], "data": [ 1 ,
2	])"));
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(Raw<int32_t>(**ints, 0), (std::vector<int32_t>{1, 2}));
  // -0 is the integer 0 (+0.0 as a float), -0.0 keeps its sign; 1e-400
  // underflows to 0; a 20-digit integer past int64 stays exact in UINT64.
  auto f = Parse(Body(R"("datatype": "FP64", "shape": [4], "data": [-0, -0.0, 1e-400, 1E+2])"));
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<double> d = Raw<double>(**f, 0);
  EXPECT_TRUE(d[0] == 0 && !std::signbit(d[0]));
  EXPECT_TRUE(d[1] == 0 && std::signbit(d[1]));
  EXPECT_EQ(d[2], 0.0);
  EXPECT_EQ(d[3], 100.0);
  // Inside a string the same letters are only text.
  auto named = Parse(R"({"id": "NaNe1 \"Infinity.\"", "inputs": [{"name": "data", )"
                     R"("datatype": "FP32", "shape": [1], "data": [NaN]}]})");
  ASSERT_TRUE(named.ok()) << named.status();
  // A fraction of hundreds of zeros (RapidJSON's own strtod read out of
  // bounds on one), in a run and as scalar data that RapidJSON tokenizes.
  const std::string tiny = "0." + std::string(300, '0') + "1";
  auto run = Parse(Body(R"("datatype": "FP64", "shape": [2], "data": [)" + tiny + ", 1]"));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Raw<double>(**run, 0)[0], 1e-301);
  auto scalar = Parse(Body(R"("datatype": "FP64", "shape": [], "data": )" + tiny));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(Raw<double>(**scalar, 0)[0], 1e-301);
  // An id the answer could not echo (a lone surrogate) is refused up front.
  auto surrogate = Parse(R"({"id": "a\udddd", "inputs": []})");
  ASSERT_FALSE(surrogate.ok());
  EXPECT_THAT(std::string(surrogate.status().message()), HasSubstr("id is not valid UTF-8"));
  auto u = Parse(Body(R"("datatype": "UINT64", "shape": [1], "data": [18446744073709551615])"));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(Raw<uint64_t>(**u, 0), std::vector<uint64_t>{~uint64_t{0}});
}

// A long run of 17-digit doubles (as a client holding doubles writes them)
// reads to the correctly rounded FP64 and FP32 values: strtod is the oracle.
TEST(JsonBindingTest, LongNumberRunsMatchStrtod) {
  std::string text = "[";
  std::vector<double> want;
  uint64_t x = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double v;
    const uint64_t bits = (x & 0x800FFFFFFFFFFFFFu) | (uint64_t{1023 - 40 + (x >> 52) % 80} << 52);
    std::memcpy(&v, &bits, 8);
    char buf[40];
    std::snprintf(buf, sizeof(buf), i % 3 == 0 ? "%.17g" : (i % 3 == 1 ? "%.9g" : "%.3e"), v);
    want.push_back(std::strtod(buf, nullptr));
    if (i > 0) text += i % 7 == 0 ? " ,\n " : ",";
    text += buf;
  }
  text += "]";
  const std::string n = std::to_string(want.size());
  auto r64 = Parse(Body(R"("datatype": "FP64", "shape": [)" + n + R"(], "data": )" + text));
  ASSERT_TRUE(r64.ok()) << r64.status();
  auto r32 = Parse(Body(R"("data": )" + text + R"(, "datatype": "FP32", "shape": [)" + n + "]"));
  ASSERT_TRUE(r32.ok()) << r32.status();
  const std::vector<double> got64 = Raw<double>(**r64, 0);
  const std::vector<float> got32 = Raw<float>(**r32, 0);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got64[i], want[i]) << i;
    ASSERT_EQ(got32[i], static_cast<float>(want[i])) << i;
  }
}

TEST(JsonBindingTest, ScalarDataIsOneElement) {
  auto r = Parse(Body(R"("datatype": "INT32", "shape": [], "data": 7)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Raw<int32_t>(**r, 0), std::vector<int32_t>{7});
  auto late = Parse(Body(R"("data": 7, "datatype": "INT32", "shape": [1])"));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(Raw<int32_t>(**late, 0), std::vector<int32_t>{7});
}

TEST(JsonBindingTest, BytesAndBoolInEitherOrder) {
  auto r = Parse(Body(R"("data": ["a\u00e9", "", "x\"y"], "datatype": "BYTES", "shape": [3])"));
  ASSERT_TRUE(r.ok()) << r.status();
  const absl::string_view raw = (*r)->request().raw_inputs[0];
  EXPECT_EQ(std::string(raw), std::string("\x03\0\0\0a\xc3\xa9\0\0\0\0\x03\0\0\0x\"y", 18));
  auto b = Parse(Body(R"("datatype": "BOOL", "shape": [3], "data": [true, false, true])"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->request().raw_inputs[0], absl::string_view("\1\0\1", 3));
}

// Each bad element is named by its flat index, whichever order the fields came in.
TEST(JsonBindingTest, ElementErrorsNameTheirIndex) {
  struct Case {
    std::string dtype, data, message;
  };
  const std::vector<Case> cases = {
      {"FP32", R"([1, "2", 3])", "input 'data'.data[1] is a string, not a number"},
      {"INT8", R"([1, 128, 3])", "input 'data'.data[1] = 128 is out of range"},
      {"INT32", R"([1, 2.5, 3])", "input 'data'.data[1] is not an integer in range"},
      {"UINT8", R"([1, 2, -1])", "input 'data'.data[2] = -1 is out of range"},
      {"INT64", R"([1, 2, 18446744073709551615])",
       "input 'data'.data[2] is not an integer in range"},
      {"BOOL", R"([true, 1, false])", "input 'data'.data[1] is a number, not true or false (BOOL)"},
      {"FP32", R"([1, {"a": [1, 2]}, 3])", "input 'data'.data[1] is an object, not a number"},
      {"FP32", R"([1, null, 3])", "input 'data'.data[1] is null, not a number"},
      {"BYTES", R"(["a", 2, "c"])", "input 'data'.data[1] is a number, not a string (BYTES)"},
  };
  for (const Case& c : cases) {
    for (bool data_first : {false, true}) {
      SCOPED_TRACE(c.dtype + " " + c.data + (data_first ? " data first" : " data last"));
      const std::string meta = R"("datatype": ")" + c.dtype + R"(", "shape": [3])";
      const std::string data = R"("data": )" + c.data;
      auto r = Parse(Body(data_first ? data + ", " + meta : meta + ", " + data));
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    }
  }
}

TEST(JsonBindingTest, CountMismatchAndDuplicateData) {
  for (bool data_first : {false, true}) {
    SCOPED_TRACE(data_first);
    const std::string meta = R"("datatype": "FP32", "shape": [2, 2])";
    auto more = Parse(Body(data_first ? R"("data": [1, 2, 3, 4, 5, 6], )" + meta
                                      : meta + R"(, "data": [1, 2, 3, 4, 5, 6])"));
    ASSERT_FALSE(more.ok());
    EXPECT_THAT(more.status().message(),
                HasSubstr("input 'data'.data has more than 4 elements but shape [2,2] needs 4"));
    auto fewer = Parse(Body(meta + R"(, "data": [[1, 2], [3]])"));
    ASSERT_FALSE(fewer.ok());
    EXPECT_THAT(fewer.status().message(),
                HasSubstr("input 'data'.data has 3 elements but shape [2,2] needs 4"));
  }
  auto twice = Parse(Body(R"("datatype": "FP32", "shape": [1], "data": [1], "data": [2])"));
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("input 'data' has data twice"));
}

TEST(JsonBindingTest, LimitsAndMalformedJson) {
  RequestLimits limits;
  limits.max_tensor_elements = 3;
  auto big = Parse(Body(R"("datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4])"), limits);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  auto bad = Parse(Body(R"("datatype": "FP32", "shape": [2], "data": [1, 2,])"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("malformed JSON at byte"));
  // Data elsewhere than inputs[i] is not captured: "data" in parameters is a parameter.
  auto param = Parse(R"({"parameters": {"data": 1}, "inputs": []})");
  ASSERT_TRUE(param.ok()) << param.status();
  ASSERT_EQ(param->get()->request().parameters.size(), 1u);
  // A non-object before an input keeps indices aligned.
  auto shifted =
      Parse(R"({"inputs": [5, {"name": "data", "datatype": "FP32", "shape": [1], "data": [1]}]})");
  ASSERT_FALSE(shifted.ok());
  EXPECT_THAT(shifted.status().message(), HasSubstr("inputs[0] must be an object"));
}

// Numbers written by the encoder parse back to the same bits.
TEST(JsonBindingTest, EncodedNumbersReadBackExactly) {
  const std::vector<float> values = {0.1f,
                                     -0.0f,
                                     1e-45f,
                                     3.4028235e38f,
                                     -123456.789f,
                                     std::numeric_limits<float>::quiet_NaN(),
                                     std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity(),
                                     16777216.0f};
  auto request = Parse(R"({"inputs": []})");
  ASSERT_TRUE(request.ok());
  JsonInferResponse response;
  response.SetModel("Roll", "1", "");
  const int64_t shape[1] = {static_cast<int64_t>(values.size())};
  std::memcpy(response.AddOutput("output", "FP32", shape, shape[0] * 4), values.data(),
              values.size() * 4);
  const int64_t ishape[1] = {3};
  const int64_t ints[3] = {std::numeric_limits<int64_t>::min(), -1,
                           std::numeric_limits<int64_t>::max()};
  std::memcpy(response.AddOutput("ints", "INT64", ishape, 24), ints, 24);
  JsonText text;
  std::vector<Tensor> binary;
  ASSERT_TRUE(response.Encode(**request, &text, &binary).ok());
  EXPECT_TRUE(binary.empty());
  const std::string json(text.view());
  EXPECT_THAT(
      json,
      HasSubstr(
          R"("data":[0.1,-0.0,1e-45,3.4028235e+38,-123456.79,NaN,Infinity,-Infinity,16777216])"));
  EXPECT_THAT(json, HasSubstr(R"("data":[-9223372036854775808,-1,9223372036854775807])"));
  EXPECT_THAT(json, HasSubstr(R"({"model_name":"Roll","model_version":"1","outputs":[)"));
  // The answer parses as a request's data would: feed it back.
  const size_t at = json.find("[0.1");
  const size_t end = json.find(']', at);
  auto back =
      Parse(Body(R"("datatype": "FP32", "shape": [9], "data": )" + json.substr(at, end - at + 1)));
  ASSERT_TRUE(back.ok()) << back.status();
  const std::vector<float> got = Raw<float>(**back, 0);
  ASSERT_EQ(got.size(), values.size());
  EXPECT_EQ(std::memcmp(got.data(), values.data(), 20), 0);  // the finite ones, bit for bit
  EXPECT_TRUE(std::isnan(got[5]));
  EXPECT_EQ(std::memcmp(got.data() + 6, values.data() + 6, 12), 0);
}

// Every status code's HTTP status: 500 only for the codes no request can
// cause (../shared/api-rest.md "Status codes").
TEST(JsonBindingTest, HttpStatusOfEveryCode) {
  struct Row {
    absl::Status status;
    int want;
  };
  const Row rows[] = {
      {absl::OkStatus(), 200},
      {absl::InvalidArgumentError("x"), 400},
      {absl::OutOfRangeError("x"), 400},
      {absl::FailedPreconditionError("x"), 400},
      {absl::UnauthenticatedError("x"), 401},
      {absl::PermissionDeniedError("x"), 403},
      {absl::NotFoundError("x"), 404},
      {absl::AlreadyExistsError("shared memory region 'r' is already registered"), 409},
      {absl::AbortedError("x"), 409},
      {absl::ResourceExhaustedError("tensor 'data' is over the limit (--max_tensor_bytes)"), 413},
      {absl::ResourceExhaustedError("in-flight byte budget exhausted (1 of "
                                    "--max_inflight_bytes=2 in use)"),
       503},
      {absl::ResourceExhaustedError("server queue is full (1 requests waiting, --max_queue=1)"),
       503},
      {absl::UnavailableError("server is shutting down"), 503},
      {absl::DeadlineExceededError("x"), 504},
      {absl::CancelledError("x"), 499},
      {absl::UnimplementedError("x"), 501},
      {absl::InternalError("x"), 500},
      {absl::UnknownError("x"), 500},
      {absl::DataLossError("x"), 500},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.status.ToString());
    EXPECT_EQ(HttpStatusOf(row.status), row.want);
  }
}

}  // namespace
}  // namespace tensorops
