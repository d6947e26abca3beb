// Transport security end to end: TLS, mutual TLS and bearer tokens against
// real tensorops-server processes, through the SDK and the CLI, plus the
// keepalive / connection-age flags. Certificates are made at test time by
// make_test_certs.sh (openssl) in a temporary directory.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorops/client.h"
#include "tests/harness/http_get.h"
#include "tests/harness/server_process.h"

namespace tensorops {
namespace {

using ::tensorops::testing::ServerProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kServer[] = TENSOROPS_SERVER_PATH;
constexpr char kCli[] = TENSOROPS_CLI_PATH;
constexpr char kToken[] = "s3cret-Token_0123456789";

using ::tensorops::testing::ReadFile;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/tensorops_security_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const int rc = std::system(
        absl::StrCat("bash '", TENSOROPS_MAKE_CERTS, "' '", dir_, "' >/dev/null").c_str());
    ASSERT_EQ(rc, 0) << "make_test_certs.sh failed (is openssl installed?)";
    std::ofstream(Path("token")) << kToken << "\n";
    std::ofstream(Path("empty_token")) << "\n";
  }
  static void TearDownTestSuite() { std::system(absl::StrCat("rm -rf '", dir_, "'").c_str()); }

  static std::string Path(const std::string& name) { return absl::StrCat(dir_, "/", name); }
  static std::vector<std::string> TlsFlags() {
    // No metrics endpoint: stopping it takes ~2 s.
    return {"--metrics_port=-1", "--tls_cert=" + Path("server.pem"),
            "--tls_key=" + Path("server.key")};
  }

  // Fails fast: no retries, short deadline.
  static ClientOptions Options(const ServerProcess& server) {
    ClientOptions o;
    o.target = server.address();
    o.retry.enabled = false;
    o.default_deadline = std::chrono::seconds(5);
    return o;
  }
  static TlsOptions Tls(const std::string& ca, const std::string& client = "") {
    TlsOptions t;
    t.root_certs = ReadFile(Path(ca + ".pem"));
    if (!client.empty()) {
      t.client_cert_chain = ReadFile(Path(client + ".pem"));
      t.client_private_key = ReadFile(Path(client + ".key"));
    }
    return t;
  }
  static std::unique_ptr<Client> Make(const ClientOptions& o) {
    auto c = Client::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  static absl::Status RollStatus(const Client& client) {
    auto out = client.Roll(Tensor(std::vector<int32_t>{1, 2, 3, 4}, {4}),
                           Tensor(std::vector<int64_t>{1}), Tensor(std::vector<int64_t>{0}));
    if (out.ok()) {
      EXPECT_THAT(out->values<int32_t>(), ElementsAre(4, 1, 2, 3));
    }
    return out.status();
  }

  // Runs a bash command line; stdout and stderr captured.
  static Result Shell(const std::string& command) {
    const std::string script = Path("cmd.sh");
    std::ofstream(script) << command << "\n";
    const int status = std::system(
        absl::StrCat("bash '", script, "' >'", Path("out"), "' 2>'", Path("err"), "'").c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(Path("out"));
    r.err = ReadFile(Path("err"));
    return r;
  }

  static std::string dir_;
};
std::string SecurityTest::dir_;

TEST_F(SecurityTest, TlsCallsSucceedThroughTheSdk) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(kServer, TlsFlags()).ok());
  ClientOptions o = Options(server);
  o.tls = Tls("ca");
  auto client = Make(o);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(RollStatus(*client).ok());
  EXPECT_TRUE(client->ListOps().ok());
  auto health = client->Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, ServingStatus::kServing);
  // The DNS name in the certificate works as well as the IP address.
  o.target = absl::StrCat("localhost:", server.port());
  auto by_name = Make(o);
  ASSERT_NE(by_name, nullptr);
  EXPECT_TRUE(RollStatus(*by_name).ok());
}

TEST_F(SecurityTest, PlaintextClientAgainstTlsServerFails) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(kServer, TlsFlags()).ok());
  auto client = Make(Options(server));
  ASSERT_NE(client, nullptr);
  absl::Status st = RollStatus(*client);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

TEST_F(SecurityTest, WrongCaFailsTheHandshake) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(kServer, TlsFlags()).ok());
  ClientOptions o = Options(server);
  o.tls = Tls("other_ca");
  auto client = Make(o);
  ASSERT_NE(client, nullptr);
  absl::Status st = RollStatus(*client);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

TEST_F(SecurityTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  ServerProcess server;
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--tls_client_ca=" + Path("ca.pem"));
  ASSERT_TRUE(server.Start(kServer, flags).ok());
  ClientOptions o = Options(server);
  {
    o.tls = Tls("ca");  // no client certificate
    auto client = Make(o);
    ASSERT_NE(client, nullptr);
    absl::Status st = RollStatus(*client);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  }
  {
    o.tls = Tls("ca", "other_client");  // signed by another CA
    auto client = Make(o);
    ASSERT_NE(client, nullptr);
    absl::Status st = RollStatus(*client);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  }
  {
    o.tls = Tls("ca", "client");
    auto client = Make(o);
    ASSERT_NE(client, nullptr);
    EXPECT_TRUE(RollStatus(*client).ok());
    EXPECT_TRUE(client->ListOps().ok());
  }
}

TEST_F(SecurityTest, BearerTokenGuardsEveryTensorOpsRpcButNotHealth) {
  ServerProcess server;
  ASSERT_TRUE(
      server.Start(kServer, {"--metrics_port=0", "--auth_token_file=" + Path("token")}).ok());
  ClientOptions o = Options(server);
  {
    auto client = Make(o);  // no token
    ASSERT_NE(client, nullptr);
    absl::Status st = RollStatus(*client);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
    EXPECT_EQ(client->ListOps().status().code(), absl::StatusCode::kUnauthenticated);
    auto health = client->Health("tensorops.v1.TensorOps");
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, ServingStatus::kServing);
  }
  for (const std::string& wrong : std::vector<std::string>{"wrong-token", std::string(kToken) + "x",
                                                           std::string(kToken).substr(1), "s"}) {
    o.bearer_token = wrong;
    auto client = Make(o);
    ASSERT_NE(client, nullptr);
    absl::Status st = RollStatus(*client);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
    EXPECT_THAT(std::string(st.message()), Not(HasSubstr(wrong)));
    EXPECT_THAT(std::string(st.message()), Not(HasSubstr(kToken)));
    auto ops = client->ListOps();
    EXPECT_EQ(ops.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(std::string(ops.status().message()), Not(HasSubstr(kToken)));
  }
  o.bearer_token = kToken;
  auto client = Make(o);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(RollStatus(*client).ok());
  EXPECT_TRUE(client->ListOps().ok());
  // The async path carries the token too.
  auto future =
      client->ExecuteFuture("Roll", {},
                            {Tensor(std::vector<int32_t>{1, 2}, {2}),
                             Tensor(std::vector<int64_t>{1}), Tensor(std::vector<int64_t>{0})});
  EXPECT_TRUE(future.get().ok());
  // Rejections are counted under UNAUTHENTICATED (1 without a token + 4 wrong ones).
  auto body = testing::HttpGet(server.metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(
      testing::FindSample(*body, "tensorops_requests_total",
                          {{"method", "Execute"}, {"op", "Roll"}, {"code", "UNAUTHENTICATED"}})
          .value_or(-1),
      5);
  EXPECT_EQ(
      testing::FindSample(*body, "tensorops_requests_total",
                          {{"method", "ListOps"}, {"op", "none"}, {"code", "UNAUTHENTICATED"}})
          .value_or(-1),
      5);
}

TEST_F(SecurityTest, CliWithTlsCaAndTokenFile) {
  ServerProcess server;
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--tls_client_ca=" + Path("ca.pem"));
  flags.push_back("--auth_token_file=" + Path("token"));
  ASSERT_TRUE(server.Start(kServer, flags).ok());
  const std::string base =
      absl::StrCat("'", kCli, "' --target ", server.address(), " --tls_ca '", Path("ca.pem"),
                   "' --tls_cert '", Path("client.pem"), "' --tls_key '", Path("client.key"), "'");
  Result ok = Shell(absl::StrCat(base, " --token_file '", Path("token"),
                                 "' run Roll --input '[1,2,3,4]' --dtype i32 --input 1 "
                                 "--input 0"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "INT32 [4]\n[4, 1, 2, 3]\n");
  Result list = Shell(absl::StrCat(base, " --token_file=", Path("token"), " list-ops"));
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("Roll"));
  Result no_token = Shell(absl::StrCat(base, " list-ops"));
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_THAT(no_token.err, HasSubstr("UNAUTHENTICATED"));
  Result health = Shell(absl::StrCat(base, " health"));  // health needs no token
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
  Result half = Shell(absl::StrCat("'", kCli, "' --tls_cert x.pem health"));
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls_cert and --tls_key go together"));
}

TEST_F(SecurityTest, CliWithTlsCaOnlyAgainstTlsServer) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(kServer, TlsFlags()).ok());
  Result r = Shell(absl::StrCat("'", kCli, "' --target ", server.address(), " --tls_ca '",
                                Path("ca.pem"), "' health"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  Result wrong = Shell(absl::StrCat("'", kCli, "' --target ", server.address(), " --tls_ca '",
                                    Path("other_ca.pem"), "' health"));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("UNAVAILABLE"));
}

TEST_F(SecurityTest, BadSecurityFlagsStopTheServer) {
  struct Case {
    std::string flags;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"--auth_token_file=" + Path("empty_token"), "is empty"},
      {"--auth_token_file=" + Path("missing"), "cannot read"},
      {"--tls_cert=" + Path("server.pem"), "--tls_cert and --tls_key go together"},
      {"--tls_client_ca=" + Path("ca.pem"), "--tls_client_ca needs --tls_cert"},
      {"--tls_cert=" + Path("missing.pem") + " --tls_key=" + Path("server.key"), "cannot read"},
      // OpenSSL's checks (server/http/tls_context.h) run with the HTTP port off too.
      {"--tls_cert=" + Path("ca.key") + " --tls_key=" + Path("server.key"),
       "--tls_cert: no PEM certificate"},
      {"--tls_cert=" + Path("server.pem") + " --tls_key=" + Path("client.key"),
       "--tls_key: does not match the certificate of --tls_cert"},
      {"--tls_cert=" + Path("server.pem") + " --tls_key=" + Path("server.pem"),
       "--tls_key: not an unencrypted PEM private key"},
      {"--tls_cert=" + Path("server.pem") + " --tls_key=" + Path("server.key") +
           " --tls_client_ca=" + Path("server.key"),
       "--tls_client_ca: no PEM certificate"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    Result r = Shell(absl::StrCat("timeout 10 '", kServer,
                                  "' --port=0 --metrics_port=-1 --http_port=-1 ", c.flags));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr(c.reason));
  }
  // The token never reaches the logs.
  Result r = Shell(absl::StrCat("timeout 10 '", kServer,
                                "' --port=0 --metrics_port=-1 --http_port=-1 --auth_token_file=",
                                Path("token"), " --tls_cert=", Path("server.pem")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, Not(HasSubstr(kToken)));
}

TEST_F(SecurityTest, HelpListsTheSecurityAndKeepaliveFlags) {
  Result r = Shell(absl::StrCat("'", kServer, "' --help"));
  for (const char* flag : {"--tls_cert", "--tls_key", "--tls_client_ca", "--auth_token_file",
                           "--keepalive_time", "--keepalive_timeout", "--max_connection_age",
                           "--max_connection_age_grace", "--max_connection_idle"}) {
    EXPECT_THAT(r.out + r.err, HasSubstr(std::string(flag) + " ")) << flag;
  }
  Result cli = Shell(absl::StrCat("'", kCli, "' --help"));
  for (const char* flag : {"--tls_ca", "--tls_cert", "--tls_key", "--token_file"}) {
    EXPECT_THAT(cli.out, HasSubstr(flag)) << flag;
  }
}

// Short connection ages: the server closes connections under the client
// (GOAWAY) and every call still succeeds on a new one.
TEST_F(SecurityTest, KeepaliveAndConnectionAgeFlagsWork) {
  ServerProcess server;
  ASSERT_TRUE(server
                  .Start(kServer, {"--metrics_port=-1", "--keepalive_time=1s",
                                   "--keepalive_timeout=1s", "--max_connection_age=500ms",
                                   "--max_connection_age_grace=2s", "--max_connection_idle=300ms"})
                  .ok());
  ClientOptions o = Options(server);
  o.retry.enabled = true;  // a call racing a GOAWAY may need its (transparent) retry
  auto client = Make(o);
  ASSERT_NE(client, nullptr);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  int calls = 0;
  while (std::chrono::steady_clock::now() < end) {
    absl::Status st = RollStatus(*client);
    EXPECT_TRUE(st.ok()) << st;
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(calls % 5 == 0 ? 400 : 50));
  }
  EXPECT_GT(calls, 10);
}

}  // namespace
}  // namespace tensorops
