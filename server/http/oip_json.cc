#include "server/http/oip_json.h"

#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "wire/status_details.h"

namespace tensorops {
namespace {

using JsonOut = rapidjson::Writer<rapidjson::StringBuffer>;

std::string Json(absl::FunctionRef<void(JsonOut&)> fill) {
  rapidjson::StringBuffer buffer;
  JsonOut w(buffer);
  fill(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

void Str(JsonOut& w, absl::string_view s) { w.String(s.data(), s.size()); }

// "key": value, for the renderings below.
void Field(JsonOut& w, const char* key, absl::string_view value) {
  w.Key(key);
  Str(w, value);
}
void Field(JsonOut& w, const char* key, uint64_t value) {
  w.Key(key);
  w.Uint64(value);
}
void Field(JsonOut& w, const char* key, const std::vector<std::string>& values) {
  w.Key(key);
  w.StartArray();
  for (const std::string& s : values) Str(w, s);
  w.EndArray();
}

}  // namespace

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:  // a shared memory region's name
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      // A tensor over a size limit names its flag, and a request larger than
      // the whole in-flight budget can never fit: 413, no Retry-After. The
      // rest is admission (overloaded): 503.
      if (ErrorReason(status) == "REQUEST_OVER_INFLIGHT_BUDGET") return 413;
      return status.message().find("(--max_") != absl::string_view::npos ? 413 : 503;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kCancelled:
      return 499;
    default:
      return 500;
  }
}

std::string ErrorJson(absl::string_view message) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("error");
  // Messages may quote what a client sent: keep the JSON valid whatever it is.
  std::string text(message);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  w.String(text.data(), text.size());
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string ErrorJson(const absl::Status& status) {
  std::string json = ErrorJson(status.message());
  const std::string details = StatusDetailsJson(WithBadRequest(status));
  if (details.empty()) return json;
  json.pop_back();  // the closing '}'
  absl::StrAppend(&json, ",\"details\":", details, "}");
  return json;
}

HttpResponse JsonResponse(int status, std::string json) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body.text = std::move(json);
  return r;
}

HttpResponse ErrorResponse(const absl::Status& status) {
  HttpResponse r = JsonResponse(HttpStatusOf(status), ErrorJson(status));
  AddRetryAfter(RetryDelay(status), &r);
  return r;
}

// The JSON renderings of OipService's values (api-rest.md "Endpoints").

std::string ServerMetadataJson(const OipServerMetadata& m) {
  return Json([&](JsonOut& w) {
    w.StartObject();
    Field(w, "name", m.name);
    Field(w, "version", m.version);
    Field(w, "extensions", m.extensions);
    w.EndObject();
  });
}

std::string ModelMetadataJson(const OipModelMetadata& m) {
  auto tensors = [](JsonOut& w, const char* key, const std::vector<OipTensorMetadata>& ts) {
    w.Key(key);
    w.StartArray();
    for (const OipTensorMetadata& t : ts) {
      w.StartObject();
      Field(w, "name", t.name);
      Field(w, "datatype", t.datatype);
      w.Key("shape");
      w.StartArray();
      for (int64_t d : t.shape) w.Int64(d);
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
  };
  return Json([&](JsonOut& w) {
    w.StartObject();
    Field(w, "name", m.name);
    Field(w, "versions", m.versions);
    Field(w, "platform", m.platform);
    tensors(w, "inputs", m.inputs);
    tensors(w, "outputs", m.outputs);
    w.EndObject();
  });
}

std::string ModelReadyJson(const OpDef& def) {
  return Json([&](JsonOut& w) {
    w.StartObject();
    Field(w, "name", def.spec.name);
    w.Key("ready");
    w.Bool(true);
    w.EndObject();
  });
}

std::string StatsJson(const std::vector<OipModelStats>& stats) {
  auto duration = [](JsonOut& w, const char* key, const OipDuration& d) {
    w.Key(key);
    w.StartObject();
    Field(w, "count", d.count);
    Field(w, "ns", d.ns);
    w.EndObject();
  };
  return Json([&](JsonOut& w) {
    w.StartObject();
    w.Key("model_stats");
    w.StartArray();
    for (const OipModelStats& s : stats) {
      w.StartObject();
      Field(w, "name", s.name);
      Field(w, "version", s.version);
      Field(w, "last_inference", s.last_inference);
      Field(w, "inference_count", s.inference_count);
      Field(w, "execution_count", s.execution_count);
      w.Key("inference_stats");
      w.StartObject();
      duration(w, "success", s.success);
      duration(w, "fail", s.fail);
      duration(w, "queue", s.queue);
      duration(w, "compute_input", OipDuration{});
      duration(w, "compute_infer", s.compute_infer);
      duration(w, "compute_output", OipDuration{});
      w.EndObject();
      Field(w, "batch_stats", std::vector<std::string>{});
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
}

std::string RepositoryIndexJson(const std::vector<OipModelIndex>& models) {
  return Json([&](JsonOut& w) {
    w.StartArray();
    for (const OipModelIndex& m : models) {
      w.StartObject();
      Field(w, "name", m.name);
      Field(w, "version", m.version);
      Field(w, "state", m.state);
      Field(w, "reason", m.reason);
      w.EndObject();
    }
    w.EndArray();
  });
}

std::string ShmStatusJson(const std::vector<OipShmRegionStatus>& regions) {
  return Json([&](JsonOut& w) {
    w.StartArray();
    for (const OipShmRegionStatus& r : regions) {
      w.StartObject();
      Field(w, "name", r.name);
      Field(w, "key", r.key);
      Field(w, "offset", r.offset);
      Field(w, "byte_size", r.byte_size);
      w.EndObject();
    }
    w.EndArray();
  });
}

absl::StatusOr<ShmRegisterBody> ParseRegisterBody(absl::string_view body) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(body.data(),
                                                                                    body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError(
        "the register body must be a JSON object {\"key\", \"offset\", \"byte_size\"}");
  }
  ShmRegisterBody out;
  auto key = doc.FindMember("key");
  if (key == doc.MemberEnd() || !key->value.IsString()) {
    return absl::InvalidArgumentError("register: key must be a string");
  }
  out.key.assign(key->value.GetString(), key->value.GetStringLength());
  for (const char* field : {"offset", "byte_size"}) {
    auto it = doc.FindMember(field);
    if (it == doc.MemberEnd()) {
      if (std::string(field) == "offset") continue;
      return absl::InvalidArgumentError("register: byte_size is missing");
    }
    if (!it->value.IsUint64()) {
      return absl::InvalidArgumentError(
          absl::StrCat("register: ", field, " must be an integer >= 0"));
    }
    (std::string(field) == "offset" ? out.offset : out.byte_size) = it->value.GetUint64();
  }
  return out;
}

}  // namespace tensorops
