// The HTTP door's route table (server/http/oip_routes.h) on its own: no
// transport, no socket. Each request is handed to OipRoutes::Route as the
// transport hands it, with an executor that runs what the routes post, and
// the answer read from the Reply: status, Allow, the JSON error's presence.
#include "server/http/oip_routes.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "kernels/op_registry.h"
#include "kernels/ops/ops.h"
#include "kernels/thread_pool.h"
#include "server/core/admission.h"
#include "server/core/call.h"
#include "server/core/metrics.h"
#include "server/oip/oip_service.h"
#include "server/oip/shm_registry.h"

namespace tensorops {
namespace {

// What the routes read of the server: not draining, no totals.
class FakeState final : public OipServerState {
 public:
  bool draining() const override { return draining_; }
  OipModelTotals Totals(absl::string_view) const override { return {}; }
  void SetSharedMemoryRegions(int64_t) override {}

  bool draining_ = false;
};

class OipRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterBuiltinOps(&registry_);
    std::vector<std::string> names;
    for (const auto& def : registry_.ops()) names.push_back(def->spec.name);
    metrics_ = std::make_unique<Metrics>(names);
    admission_ = std::make_unique<AdmissionController>(16, 1 << 20, nullptr);
    pool_ = std::make_unique<ThreadPool>(1);
    pipeline_ = std::make_unique<CallPipeline>(&registry_, pool_.get(), admission_.get(),
                                               metrics_.get(), CallPipeline::Options());
    shm_ = std::make_unique<ShmRegistry>(ShmRegistry::Options());
    oip_ = std::make_unique<OipService>(&registry_, shm_.get(), &state_, OipService::Options());
    routes_ = std::make_unique<OipRoutes>(pipeline_.get(), oip_.get());
  }

  // Routes one request and returns its answer; what the routes post to the
  // loop runs before this returns.
  HttpResponse Route(HttpMethod method, const std::string& target, std::string body = "") {
    HttpRequest request;
    request.method = method;
    request.target = target;
    if (!body.empty()) {
      EXPECT_TRUE(request.body.ReserveExact(body.size()).ok());
      std::copy(body.begin(), body.end(), request.body.end());
      request.body.Grow(body.size());
    }
    std::optional<HttpResponse> answer;
    std::deque<std::function<void()>> posted;
    routes_->Route(
        std::move(request), [&posted](std::function<void()> fn) { posted.push_back(fn); },
        [&answer](HttpResponse r) {
          EXPECT_FALSE(answer.has_value()) << "answered twice";
          answer = std::move(r);
        });
    while (!answer.has_value() && !posted.empty()) {
      std::function<void()> next = std::move(posted.front());
      posted.pop_front();
      next();
    }
    EXPECT_TRUE(answer.has_value()) << target;
    return answer.has_value() ? *std::move(answer) : HttpResponse();
  }

  // The answer's bytes as the connection writes them: text, then each part.
  static std::string Body(const HttpResponse& r) {
    std::string out = r.body.text;
    for (absl::string_view part : r.body.parts) out.append(part.data(), part.size());
    return out;
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [key, value] : r.headers) {
      if (absl::EqualsIgnoreCase(key, name)) return value;
    }
    return "";
  }

  OpRegistry registry_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<AdmissionController> admission_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CallPipeline> pipeline_;
  std::unique_ptr<ShmRegistry> shm_;
  FakeState state_;
  std::unique_ptr<OipService> oip_;
  std::unique_ptr<OipRoutes> routes_;
};

TEST_F(OipRoutesTest, EachPathGoesToItsRouteOr404Or405) {
  const struct {
    HttpMethod method;
    const char* target;
    int status;
    const char* allow;  // the Allow header of a 405
  } kRows[] = {
      {HttpMethod::kGet, "/v2/health/live", 200, ""},
      {HttpMethod::kHead, "/v2/health/live", 200, ""},
      {HttpMethod::kGet, "/v2/health/ready", 200, ""},
      {HttpMethod::kGet, "/v2", 200, ""},
      {HttpMethod::kGet, "/v2/models/Roll", 200, ""},
      {HttpMethod::kGet, "/v2/models/Roll/ready", 200, ""},
      {HttpMethod::kGet, "/v2/models/Roll/stats", 200, ""},
      {HttpMethod::kPost, "/v2/repository/index", 200, ""},
      {HttpMethod::kGet, "/v2/models/NoSuchOp", 404, ""},
      {HttpMethod::kGet, "/v2/no/such/path", 404, ""},
      {HttpMethod::kGet, "/v3/health/live", 404, ""},
      {HttpMethod::kGet, "/", 404, ""},
      {HttpMethod::kPost, "/v2/health/live", 405, "GET"},
      {HttpMethod::kGet, "/v2/models/Roll/infer", 405, "POST"},
      {HttpMethod::kOther, "/v2/repository/index", 405, "POST"},
      // Shared memory off: register is 501, status lists nothing.
      {HttpMethod::kPost, "/v2/systemsharedmemory/register", 501, ""},
      {HttpMethod::kGet, "/v2/systemsharedmemory/status", 200, ""},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.target);
    const HttpResponse r = Route(row.method, row.target);
    EXPECT_EQ(r.status, row.status);
    EXPECT_EQ(Header(r, "Allow"), row.allow);
    // Every answer is JSON (an object or a list), errors as {"error": ...}.
    const std::string body = Body(r);
    ASSERT_FALSE(body.empty());
    EXPECT_TRUE(body[0] == '{' || body[0] == '[') << body;
    if (row.status >= 400) {
      EXPECT_TRUE(absl::StartsWith(body, "{\"error\":")) << body;
    }
  }
}

TEST_F(OipRoutesTest, ReadyFollowsTheDrainAndLiveDoesNot) {
  state_.draining_ = true;
  pipeline_->StartDraining();
  EXPECT_EQ(Route(HttpMethod::kGet, "/v2/health/live").status, 200);
  EXPECT_EQ(Route(HttpMethod::kGet, "/v2/health/ready").status, 503);
  EXPECT_EQ(Route(HttpMethod::kGet, "/v2/models/Roll").status, 503);
}

TEST_F(OipRoutesTest, InferRunsACallAndAnswersThroughTheLoop) {
  const std::string body =
      R"({"inputs":[{"name":"data","shape":[4],"datatype":"INT32","data":[1,2,3,4]},)"
      R"({"name":"shift","shape":[1],"datatype":"INT64","data":[1]},)"
      R"({"name":"axes","shape":[1],"datatype":"INT64","data":[0]}]})";
  const HttpResponse r = Route(HttpMethod::kPost, "/v2/models/Roll/infer", body);
  EXPECT_EQ(r.status, 200) << Body(r);
  EXPECT_TRUE(absl::StrContains(Body(r), "\"data\":[4,1,2,3]")) << Body(r);
  // A bad body is the route's 400, with the field named.
  const HttpResponse bad = Route(HttpMethod::kPost, "/v2/models/Roll/infer", "{\"inputs\":3}");
  EXPECT_EQ(bad.status, 400) << Body(bad);
  EXPECT_TRUE(absl::StrContains(Body(bad), "inputs")) << Body(bad);
}

}  // namespace
}  // namespace tensorops
