// The tensorops CLI end to end against a real server, including every CLI
// example in docs/sdk.md.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli/npy.h"
#include "client/cli/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/server_process.h"
#include "tests/sanitizers.h"

namespace tensorops {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::tensorops::testing::ReadFile;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess;
    // --trace_headers: VerbosePrintsTraceAndDetails prints the server's.
    ASSERT_TRUE(
        server_->Start(TENSOROPS_SERVER_PATH, {"--metrics_port=0", "--trace_headers=true"}).ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    char tmpl[] = "/tmp/tensorops_cli_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf '", dir_, "'").c_str()); }

  // Runs a bash command line in dir_ with the CLI on PATH and
  // TENSOROPS_TARGET pointing at the server.
  Result Shell(const std::string& command) {
    const std::string script = absl::StrCat(dir_, "/cmd.sh");
    std::ofstream(script) << "cd '" << dir_ << "' || exit 99\n"
                          << "export PATH='" << CliDir() << "':\"$PATH\"\n"
                          << "export TENSOROPS_TARGET=" << server_->address() << "\n"
                          << command << "\n";
    const int status = std::system(
        absl::StrCat("bash '", script, "' >'", dir_, "/out' 2>'", dir_, "/err'").c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(dir_ + "/out");
    r.err = ReadFile(dir_ + "/err");
    return r;
  }
  static std::string CliDir() {
    std::string p = TENSOROPS_CLI_PATH;
    return p.substr(0, p.rfind('/'));
  }

  static testing::ServerProcess* server_;
  std::string dir_;
};
testing::ServerProcess* CliTest::server_ = nullptr;

TEST_F(CliTest, Health) {
  Result r = Shell("tensorops health");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = Shell("tensorops health --service tensorops.v1.TensorOps");
  EXPECT_EQ(r.out, "SERVING\n");
}

TEST_F(CliTest, ListOps) {
  Result r = Shell("tensorops list-ops");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Roll (alias Roll-7)"));
  EXPECT_THAT(r.out, HasSubstr("onnx.ReverseSequence"));
  EXPECT_THAT(r.out, HasSubstr("--attr mode=<string>"));
}

TEST_F(CliTest, RunPrintsNestedArrays) {
  Result r = Shell(
      "tensorops run Roll --input '[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]' --dtype i32 "
      "--input '[-1,2]' --input '[0,1]'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "INT32 [4, 3]\n[[5, 6, 4],\n [8, 9, 7],\n [11, 12, 10],\n [2, 3, 1]]\n");
  r = Shell(
      "tensorops --target " + server_->address() +
      " --deadline 5s run Reverse --attr mode=index --input '[\"a\",\"b\"]' --input 0 --shape 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "STRING [2]\n[\"b\", \"a\"]\n");
  // Every dtype name parses and round-trips through the server and the printer.
  for (const char* t : {"f32", "f64", "f16", "bf16", "f8e4m3", "f8e5m2", "i8", "i16", "i32", "i64",
                        "u8", "u16", "u32", "u64"}) {
    SCOPED_TRACE(t);
    r =
        Shell(absl::StrCat("tensorops run Reverse --attr mode=index --input '[[1,2],[3,4]]' "
                           "--dtype ",
                           t, " --input '[0]'"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("[[3, 4],\n [1, 2]]\n"));
  }
  r = Shell(
      "tensorops run Reverse --attr mode=index --input '[[1,2],[3,-4]]' --dtype c64 "
      "--input '[0]'");
  EXPECT_EQ(r.out, "COMPLEX64 [2]\n[[3, -4], [1, 2]]\n") << r.err;
  r = Shell("tensorops run Reverse --attr mode=mask --input '[true,false]' --input '[true]'");
  EXPECT_EQ(r.out, "BOOL [2]\n[false, true]\n") << r.err;
}

// --verbose: the trace sent and the server's, its server-timing, and a
// failure's google.rpc details, on stderr (issue 40); stdout unchanged.
TEST_F(CliTest, VerbosePrintsTraceAndDetails) {
  Result r = Shell(
      "tensorops run Roll --verbose --traceparent "
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 --input '[[1,2],[3,4]]' "
      "--input '[1]' --input '[0]'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "INT64 [2, 2]\n[[3, 4],\n [1, 2]]\n");
  EXPECT_THAT(r.err, HasSubstr("tensorops: traceparent "
                               "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n"));
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("tensorops: server traceparent "
                                       "00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01\n"));
  EXPECT_THAT(r.err, ::testing::ContainsRegex(
                         "tensorops: server-timing queue;dur=[0-9.]+, kernel;dur=[0-9.]+, "
                         "total;dur=[0-9.]+\n"));
  // --verbose without --traceparent: a new trace per call; a bad request's field.
  r = Shell("tensorops run Roll -v --input '[[1,2],[3,4]]' --input '[1]' --input '[5]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("tensorops: traceparent 00-[0-9a-f]{32}-[0-9a-f]{16}-01"));
  EXPECT_THAT(r.err,
              HasSubstr("tensorops: bad request: field 'inputs[2].raw_data': Roll: axes[0] = 5"));
  // Without --verbose: nothing but the error line.
  r = Shell("tensorops run Roll --input '[[1,2],[3,4]]' --input '[1]' --input '[5]'");
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("traceparent")));
}

// Streamed runs: the same output either way; a progress bar only when asked
// for (--progress always) or on a terminal (never here: stderr is a file).
TEST_F(CliTest, StreamedRunAndProgress) {
  std::vector<uint8_t> big(size_t{3} << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  ASSERT_TRUE(
      cli::WriteNpyFile(dir_ + "/s.npy", Tensor::View(big.data(), {3, int64_t{1} << 20})).ok());
  const std::string call =
      "tensorops run Roll --input @s.npy --input '[1]' --input '[0]' --output r.npy";
  Result unary = Shell(call + " --stream never");
  ASSERT_EQ(unary.exit_code, 0) << unary.err;
  auto want = cli::ReadNpyFile(dir_ + "/r.npy");
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(want->values<uint8_t>()[size_t{1} << 20], big[0]);  // row 0 moved to row 1

  Result quiet = Shell(call + " --stream always");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "") << "a progress bar although stderr is not a terminal";
  auto got = cli::ReadNpyFile(dir_ + "/r.npy");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == *want);

  // --stream_threshold moves the automatic switch: 1 MiB streams these 3 MiB.
  Result bar = Shell(call + " --stream_threshold 1048576 --progress always");
  ASSERT_EQ(bar.exit_code, 0) << bar.err;
  EXPECT_NE(bar.err.find("\rtensorops: "), std::string::npos) << bar.err;
  EXPECT_NE(bar.err.find(" of 6.00 MiB"), std::string::npos) << bar.err;  // 3 MiB each way
  EXPECT_NE(bar.err.find("ETA"), std::string::npos) << bar.err;
  EXPECT_NE(bar.err.find("transfer done in"), std::string::npos) << bar.err;

  Result bad = Shell("tensorops run Roll --input 1 --input 1 --input 0 --stream sometimes");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--stream 'sometimes' is not auto, always or never"), std::string::npos);
}

// A streamed run from a .npy file to a .npy file flows in constant memory:
// neither the CLI nor the server holds the tensor (StreamSource/StreamSink
// in the CLI, the server's window), and the file is the Roll's.
TEST_F(CliTest, StreamedNpyToNpyRunsInConstantMemory) {
  const int64_t rows = 256, cols = int64_t{1} << 20;  // 256 MiB of UINT8
  {
    std::vector<uint8_t> row(cols);
    auto header = cli::NpyHeaderFor(DataType::kUInt8, {rows, cols});
    ASSERT_TRUE(header.ok());
    std::ofstream f(dir_ + "/big.npy", std::ios::binary);
    f.write(header->data(), static_cast<std::streamsize>(header->size()));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; c += 4096) row[c] = static_cast<uint8_t>(r);
      f.write(reinterpret_cast<const char*>(row.data()), cols);
    }
  }
  Result r = Shell(
      "/usr/bin/time -f 'maxrss_kib=%M' tensorops run Roll --input @big.npy --input '[3]' "
      "--input '[0]' --output out.npy --stream always --progress never");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote out.npy: UINT8 [256, 1048576]\n");
  const size_t at = r.err.find("maxrss_kib=");
  ASSERT_NE(at, std::string::npos) << r.err;
  const int64_t rss_kib = std::stoll(r.err.substr(at + 11));
  std::printf("the CLI's peak RSS for a 256 MiB .npy streamed to .npy: %lld KiB\n",
              static_cast<long long>(rss_kib));
  // Not under a sanitizer: ASan keeps freed chunk buffers in its quarantine
  // (256 MiB by default), so its RSS is not the CLI's (357 MiB here).
  if (!testing::kSanitized) {
    EXPECT_LT(rss_kib, 128 * 1024) << "the CLI held " << rss_kib << " KiB for a 256 MiB tensor";
  }
  // Rolled by 3 rows: out row r is in row (r - 3) mod 256. Checked by seeks,
  // without reading the file whole.
  auto layout = cli::ReadNpyLayout(dir_ + "/out.npy");
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::ifstream f(dir_ + "/out.npy", std::ios::binary);
  for (int64_t row = 0; row < rows; row += 17) {
    f.seekg(layout->data_offset + row * cols + 4096);
    char b = 0;
    f.read(&b, 1);
    EXPECT_EQ(static_cast<uint8_t>(b), static_cast<uint8_t>((row - 3 + rows) % rows)) << row;
  }
}

// `run OP ... then OP ...`: one call, the same output as running the ops one
// by one (each through a .npy file), either transport.
TEST_F(CliTest, ChainRun) {
  std::vector<int16_t> in(4 * 3 * 5);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int16_t>(i * 37 % 101 - 50);
  ASSERT_TRUE(cli::WriteNpyFile(dir_ + "/in.npy", Tensor(in, {4, 3, 5})).ok());
  const std::vector<std::string> ops = {
      "Roll --input '[1,-2]' --input '[0,2]'",
      "Reverse --attr mode=mask --input '[false,true,true]'",
      "ReverseSequence --attr batch_axis=2 --attr seq_axis=0 --input '[4,1,0,2,3]' --dtype i32",
      "onnx.ReverseSequence --input '[3,1,2]' --attr batch_axis=1 --attr time_axis=0",
      "Roll-7 --input 2 --input -1",
  };
  std::string one_by_one = "set -e\ncp in.npy step0.npy\n";
  std::string chain = "tensorops run";
  for (size_t i = 0; i < ops.size(); ++i) {
    const size_t space = ops[i].find(' ');
    absl::StrAppend(&one_by_one, "tensorops run ", ops[i].substr(0, space), " --input @step", i,
                    ".npy", ops[i].substr(space), " --output step", i + 1, ".npy >/dev/null\n");
    absl::StrAppend(&chain, i == 0 ? " " : " then ", ops[i].substr(0, space),
                    i == 0 ? " --input @in.npy" : "", ops[i].substr(space));
  }
  absl::StrAppend(&one_by_one, "tensorops run Roll --input @step", ops.size(),
                  ".npy --input 0 --input 0\n");
  Result want = Shell(one_by_one);
  ASSERT_EQ(want.exit_code, 0) << want.err;
  ASSERT_THAT(want.out, HasSubstr("INT16 [4, 3, 5]\n"));
  for (const char* flags : {"", " --stream never", " --stream always --progress never"}) {
    SCOPED_TRACE(flags);
    Result got = Shell(chain + flags);
    EXPECT_EQ(got.exit_code, 0) << got.err;
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.err, "");
    got = Shell(absl::StrCat(chain, flags, " --output chained.npy"));
    EXPECT_EQ(got.exit_code, 0) << got.err;
    EXPECT_EQ(got.out, "wrote chained.npy: INT16 [4, 3, 5]\n");
    auto a = cli::ReadNpyFile(dir_ + "/chained.npy");
    auto b = cli::ReadNpyFile(absl::StrCat(dir_, "/step", ops.size(), ".npy"));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(*a == *b);
  }
  // Options before, between and after the ops; --dtype and --shape go with
  // the --input before them, in whichever op it is.
  Result r = Shell(
      "tensorops --deadline 5s run --input '[1,2,3,4,5,6]' --dtype u8 --shape 2,3 Reverse "
      "--input '[0]' --attr mode=index --stream never then Roll --input 1 --input '[1]' "
      "--dtype i32 then Reverse --input 0 --shape 1 --attr mode=index");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "UINT8 [2, 3]\n[[3, 1, 2],\n [6, 4, 5]]\n");
}

TEST_F(CliTest, NpyRoundTrip) {
  // Write an input file with the library, run, read the CLI's output file back.
  std::vector<float> in = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(cli::WriteNpyFile(dir_ + "/in.npy", Tensor(in, {2, 3})).ok());
  Result r = Shell(
      "tensorops run ReverseSequence --attr batch_axis=0 --attr seq_axis=1 "
      "--input @in.npy --input '[3,2]' --output out.npy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote out.npy: FLOAT32 [2, 3]\n");
  auto out = cli::ReadNpyFile(dir_ + "/out.npy");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->shape(), ElementsAre(2, 3));
  EXPECT_THAT(out->values<float>(), ElementsAre(3, 2, 1, 5, 4, 6));
  // The CLI reads its own output file too (every NumPy dtype it supports).
  for (const char* t : {"f32", "f64", "f16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                        "bool", "c64", "c128"}) {
    SCOPED_TRACE(t);
    const bool is_bool = std::string(t) == "bool", is_c = absl::StartsWith(t, "c");
    const std::string vals = is_bool ? "[[true,false],[false,false]]"
                             : is_c  ? "[[[1,2],[3,4]],[[5,6],[7,8]]]"
                                     : "[[1,2],[3,4]]";
    r = Shell(absl::StrCat("tensorops run Roll --input '", vals, "' --dtype ", t,
                           " --input 1 --input 1 --output a.npy && "
                           "tensorops run Roll --input @a.npy --input 1 --input 1"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto a = cli::ReadNpyFile(dir_ + "/a.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    auto orig = cli::ParseTensor(vals, *cli::ParseDataType(t), std::nullopt);
    ASSERT_TRUE(orig.ok());
    EXPECT_EQ(r.out, absl::StrCat("wrote a.npy: ", DataTypeName(orig->dtype()), " [2, 2]\n",
                                  DataTypeName(orig->dtype()), " [2, 2]\n",
                                  cli::FormatTensor(*orig), "\n"));
  }
}

TEST_F(CliTest, NpyRejectsUnsupported) {
  std::string bytes = *cli::SerializeNpy(Tensor(std::vector<int32_t>{1, 2}));
  std::string big_endian = absl::StrReplaceAll(bytes, {{"'<i4'", "'>i4'"}});
  std::ofstream(dir_ + "/be.npy", std::ios::binary) << big_endian;
  Result r = Shell("tensorops run Reverse --attr mode=index --input @be.npy --input '[0]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("big-endian dtype '>i4' is not supported"));
  EXPECT_FALSE(cli::ParseNpy(absl::StrReplaceAll(bytes, {{"False", "True "}}), "x").ok());
  EXPECT_FALSE(cli::ParseNpy(bytes.substr(0, bytes.size() - 1), "x").ok());
  EXPECT_FALSE(cli::SerializeNpy(Tensor::FromFloats(DataType::kBFloat16, {1}, {1})).ok());
}

TEST_F(CliTest, BadInputGivesOneLineReason) {
  struct Case {
    const char* command;
    int exit_code;
    const char* reason;
  };
  const Case cases[] = {
      {"tensorops", 2, "no command given"},
      {"tensorops frob", 2, "unknown command 'frob'"},
      {"tensorops run Roll", 2, "run needs at least one --input"},
      {"tensorops run Roll --input '[1,2'", 2, "--input 1: expected ',' or ']'"},
      {"tensorops run Roll --input '[[1,2],[3]]'", 2, "ragged nesting"},
      {"tensorops run Roll --input '[300]' --dtype i8", 2, "value 0 (300) is not a valid i8"},
      {"tensorops run Roll --input 1 --dtype f128", 2, "unknown dtype 'f128'"},
      {"tensorops run Roll --dtype f32", 2, "--dtype must follow an --input"},
      {"tensorops run Roll --input @missing.npy", 1, "cannot open missing.npy"},
      {"tensorops run Roll --input '[[1,2],[3,4]]' --input 1 --input 2", 1,
       "INVALID_ARGUMENT: Roll: axes[0] = 2 is out of range [-2, 1] for data of rank 2"},
      {"tensorops run Frob --input 1", 1, "UNIMPLEMENTED: unknown op"},
      {"tensorops --target 127.0.0.1:1 --deadline 3s health", 1, "UNAVAILABLE"},
      {"tensorops --deadline soon health", 2, "--deadline 'soon' is not a duration"},
      {"tensorops run Reverse --input '[\"a\"]' --input '[0]' --attr mode=index --output s.npy", 1,
       "cannot write STRING to .npy"},
      // Chains.
      {"tensorops run then Roll --input 1", 2, "'then' must follow an op"},
      {"tensorops run Roll --input 1 --input 1 --input 0 then then Roll", 2,
       "'then' must follow an op"},
      {"tensorops run Roll --input 1 --input 1 --input 0 then", 2, "'then' needs an op name"},
      {"tensorops run Roll --input 1 --input 1 --input 0 then Reverse Roll", 2,
       "unexpected argument 'Roll'"},
      {"tensorops run Roll --input 1 --input 1 --input 0 then Reverse --dtype i32", 2,
       "--dtype must follow an --input"},
      {"tensorops health then Roll", 2, "unexpected argument 'then'"},
      {"tensorops run Reverse --input '[1,2]' --input '[0]' then Roll --input 1 --input '[0'", 2,
       "then[0] (Roll) --input 2: expected ',' or ']'"},
      {"tensorops run Reverse --input '[1,2]' --input '[0]' then Roll --input @missing.npy", 1,
       "then[0] (Roll) --input 1: cannot open missing.npy"},
      {"tensorops run Reverse --attr mode=index --input '[[1,2],[3,4]]' --input '[0]' "
       "then Roll --input 1 --input 2",
       1, "INVALID_ARGUMENT: then[0] (Roll): "},
      {"tensorops run Reverse --attr mode=index --input '[[1,2],[3,4]]' --input '[0]' "
       "then Roll --input 1 --input 0 then Frob",
       1, "UNIMPLEMENTED: then[1]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.command);
    Result r = Shell(c.command);
    EXPECT_EQ(r.exit_code, c.exit_code);
    EXPECT_THAT(r.err, HasSubstr(c.reason));
    EXPECT_TRUE(absl::StartsWith(r.err, "tensorops: error: ")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(CliTest, HelpHasExamples) {
  Result r = Shell("tensorops --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("examples:"));
  EXPECT_THAT(r.out, HasSubstr("tensorops run Roll"));
  EXPECT_THAT(r.out, HasSubstr("then OP [INPUT...]"));
  EXPECT_THAT(r.out, HasSubstr("then Roll --input"));
}

// Every ```sh block in docs/sdk.md, docs/server.md and README.md whose commands start with
// "tensorops" is run; when a ```text block follows, stdout must equal it (stderr, with a non-zero
// exit status, when it starts "tensorops: error: ").
TEST_F(CliTest, DocsExamplesRun) {
  for (const auto& [doc, min_examples] : std::vector<std::pair<std::string, int>>{
           {TENSOROPS_SDK_DOC, 5}, {TENSOROPS_SERVER_DOC, 1}, {TENSOROPS_README, 2}}) {
    SCOPED_TRACE(doc);
    const std::string md = ReadFile(doc);
    ASSERT_FALSE(md.empty());
    std::vector<std::string> lines = absl::StrSplit(md, '\n');
    int examples = 0;
    // Files the docs refer to.
    ASSERT_TRUE(cli::WriteNpyFile(
                    dir_ + "/data.npy",
                    Tensor(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}))
                    .ok());
    // Past the CLI's 64 MiB stream threshold: docs/server.md's big-tensor example
    // goes through ExecuteStream.
    {
      std::vector<uint8_t> big(size_t{72} << 20);
      for (size_t k = 0; k < big.size(); ++k) big[k] = static_cast<uint8_t>(k * 131 + (k >> 20));
      ASSERT_TRUE(
          cli::WriteNpyFile(dir_ + "/big.npy", Tensor::View(big.data(), {72, int64_t{1} << 20}))
              .ok());
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i] != "```sh") continue;
      std::string command;
      size_t j = i + 1;
      for (; j < lines.size() && lines[j] != "```"; ++j) absl::StrAppend(&command, lines[j], "\n");
      if (!absl::StartsWith(command, "tensorops ")) continue;
      std::optional<std::string> expected;
      if (j + 2 < lines.size() && lines[j + 1].empty() && lines[j + 2] == "```text") {
        std::string text;
        for (size_t k = j + 3; k < lines.size() && lines[k] != "```"; ++k) {
          absl::StrAppend(&text, lines[k], "\n");
        }
        expected = text;
      }
      SCOPED_TRACE(command);
      Result r = Shell(command);
      if (expected.has_value() && absl::StartsWith(*expected, "tensorops: error: ")) {
        EXPECT_NE(r.exit_code, 0);
        EXPECT_EQ(r.err, *expected);
      } else {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        if (expected.has_value()) {
          EXPECT_EQ(r.out, *expected);
        }
      }
      ++examples;
    }
    EXPECT_GE(examples, min_examples);
  }
}

}  // namespace
}  // namespace tensorops
