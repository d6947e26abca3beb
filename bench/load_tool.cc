// load_tool: closed-loop gRPC load against tensorops-server or the bare echo
// server (bench/echo_server.cc), for one cell (payload size x concurrency).
//
// `--concurrency` calls are kept in flight (gRPC callback API) over
// `--channels` shared channels (each its own TCP connection); every completed
// call immediately starts the next one on its slot. A warm-up phase (bounded
// by --warmup_seconds and --warmup_calls) runs first at the same concurrency;
// then calls are measured until --duration_seconds have passed or
// --max_calls calls were started, and the tool waits for the calls still in
// flight. Throughput = measured successful calls / (last completion - start
// of measurement). Latency = client-side round trip of each measured call.
//
// tensorops: Execute of Roll (default; shift n/3+1 on axis 0) or Reverse
// (axis 0) of a 1-D FLOAT32 tensor whose raw_data is --payload_bytes long.
// oip: the same op and tensor as a ModelInfer of the Open Inference Protocol
// (model "Roll" or "Reverse", every input in raw_input_contents, the reply's
// output read from raw_output_contents), on the same port.
// rest, rest_json: the same ModelInfer over the HTTP/REST door (--address is
// its HOST:PORT, the server's --http_port): POST /v2/models/{op}/infer on
// keep-alive HTTP/1.1 connections (Boost.Beast, one connection per in-flight
// call, --channels io_context threads). rest sends every input and gets
// the output in Triton's binary tensor extension; rest_json sends and gets
// JSON arrays, verified by parsing the reply's numbers (RapidJSON) back into
// FP32. "request_bytes" is the whole HTTP body; "reply_bytes" the last one.
// echo: Echo of a --payload_bytes bytes field. Every reply is checked for
// size; every --verify_every-th reply (1 = all) is compared byte for byte with
// the expected output.
//
// --mode=stream measures one large tensor at a time instead (see RunStream):
// against tensorops, ExecuteStream of a UINT8 Roll of --tensor_bytes bytes,
// spoken with the generated stubs (header with per-input CRC-32, 1 MiB
// chunks in order, half-close; then the output header and chunks; with
// --flow=true StreamHeader.flow, the output chunks at any offset while the
// input goes out, each CRC checked, then the trailer); against
// echo, EchoStream of the same bytes in the same chunks. --calls calls one
// after the other; each prints one JSON line with its seconds and GB/s.
//
// Output: one JSON line on stdout per run, e.g.
//   {"target":"echo","op":"echo","payload_bytes":65536,"concurrency":8,...,
//    "rps":15890.2,"p50_us":480.1,"p99_us":1010.7,"errors":0,...}
// Exit status: 0; 1 if a reply failed verification, no measured call
// succeeded, or the tool could not connect; 2 on a usage error. RPC errors
// are counted in "errors" (and the first one quoted in "first_error").
// The tool's own allocator keeps large blocks mapped (see main) so that it
// does not pay a page fault per 4 KiB of every large reply.
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/echo.grpc.pb.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/span.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/span_body.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "inference/grpc_service.grpc.pb.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tensorops/v1/tensorops.grpc.pb.h"

namespace {

namespace v1 = tensorops::v1;
namespace eb = tensorops::bench;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

struct Options {
  std::string mode = "unary";        // unary | stream
  std::string target = "tensorops";  // tensorops | oip | rest | rest_json | echo
  std::string address = "127.0.0.1:50051";
  std::string op = "roll";  // roll | reverse (tensorops only)
  int64_t payload_bytes = 4096;
  int concurrency = 1;
  int channels = 0;  // 0: min(concurrency, 4)
  double warmup_seconds = 0.5;
  int64_t warmup_calls = 1000000;
  double duration_seconds = 2.0;
  int64_t max_calls = 10000000;
  int64_t verify_every = 16;
  double deadline_seconds = 120.0;
  // Non-empty: every unary gRPC call sends this W3C traceparent (a traced
  // caller, e.g. 00-<32 hex>-<16 hex>-01), to measure what tracing costs.
  std::string traceparent;
  int64_t max_message_bytes = int64_t{272} << 20;  // tensorops-server's default
  // --mode=stream only.
  int64_t tensor_bytes = int64_t{64} << 20;
  int64_t chunk_bytes = int64_t{1} << 20;  // tensorops-server's --stream_chunk_bytes default
  int calls = 3;
  // tensorops: StreamHeader.flow (output chunks while the input arrives, any order).
  bool flow = false;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Shared;

// One in-flight call at a time; its callback starts the next call.
struct Slot {
  Shared* sh = nullptr;
  int channel = 0;
  std::unique_ptr<grpc::ClientContext> ctx;
  v1::ExecuteResponse exec_response;
  inference::ModelInferResponse infer_response;
  eb::EchoResponse echo_response;
  // rest: this slot's keep-alive connection (on its channel's io_context),
  // the request (headers built once; the body a view of Shared::rest_body),
  // the parser of the reply being read, and the last reply's body (moved
  // into the next parser so that its capacity is reused, not reallocated).
  std::unique_ptr<beast::tcp_stream> http;
  bool connected = false;
  std::unique_ptr<net::steady_timer> retry;  // the 1 ms pause after a failed connect
  http::request<http::span_body<const char>> rest_request;
  beast::flat_buffer rest_buffer;  // bytes read and not yet parsed
  std::optional<http::response_parser<http::string_body>> rest_parser;
  std::string rest_reply;
  int64_t rest_reply_bytes = 0;
  int64_t start_ns = 0;
  int64_t seq = 0;
  bool measured = false;
  // Results, touched only by this slot's (serialised) callbacks.
  std::vector<int64_t> latencies_ns;
  int64_t ok = 0, errors = 0, verified = 0, verify_failures = 0, warmup_done = 0;
  std::string first_error;
  int64_t last_done_ns = 0;
};

struct Shared {
  Options opt;
  bool is_echo = false;
  bool is_oip = false;
  bool is_rest = false;                       // rest or rest_json
  bool rest_binary = false;                   // rest: the binary tensor extension both ways
  std::vector<tcp::endpoint> rest_endpoints;  // --address, resolved once
  std::string rest_host;
  std::string rest_path;           // /v2/models/{op}/infer
  std::string rest_body;           // built once, sent by reference
  std::string rest_header_length;  // Inference-Header-Content-Length (rest)
  std::vector<std::unique_ptr<v1::TensorOps::Stub>> exec_stubs;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> oip_stubs;
  inference::ModelInferRequest infer_request;
  std::vector<std::unique_ptr<eb::Echo::Stub>> echo_stubs;
  v1::ExecuteRequest exec_request;
  eb::EchoRequest echo_request;
  std::string expected;  // the expected reply bytes (raw_data or payload)
  int64_t elements = 0;

  int64_t warm_end_ns = 0;
  std::mutex switch_mu;
  std::atomic<int> phase{0};  // 0 warm-up, 1 measuring
  std::atomic<int64_t> measure_start_ns{0};
  std::atomic<int64_t> end_ns{0};
  std::atomic<int64_t> warm_started{0};
  std::atomic<int64_t> measured_started{0};

  std::mutex mu;
  std::condition_variable cv;
  int active = 0;
};

void SlotDone(Slot* s, const grpc::Status& status);
void StartRest(Slot* s);

void SwitchToMeasuring(Shared* sh, int64_t now) {
  std::lock_guard<std::mutex> lock(sh->switch_mu);
  if (sh->phase.load() != 0) return;
  sh->measure_start_ns.store(now);
  sh->end_ns.store(now + static_cast<int64_t>(sh->opt.duration_seconds * 1e9));
  sh->phase.store(1);
}

void StartNext(Slot* s) {
  Shared* sh = s->sh;
  const int64_t now = NowNs();
  if (sh->phase.load() == 0) {
    const int64_t n = sh->warm_started.fetch_add(1);
    if (now < sh->warm_end_ns && n < sh->opt.warmup_calls) {
      s->measured = false;
      s->seq = n;
    } else {
      SwitchToMeasuring(sh, now);
    }
  }
  if (sh->phase.load() == 1) {
    const int64_t m = sh->measured_started.fetch_add(1);
    if (m >= sh->opt.max_calls || now >= sh->end_ns.load()) {
      std::lock_guard<std::mutex> lock(sh->mu);
      if (--sh->active == 0) sh->cv.notify_all();
      return;
    }
    s->measured = true;
    s->seq = m;
  }
  s->ctx = std::make_unique<grpc::ClientContext>();
  s->ctx->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(sh->opt.deadline_seconds * 1e6)));
  if (!sh->opt.traceparent.empty()) s->ctx->AddMetadata("traceparent", sh->opt.traceparent);
  s->start_ns = NowNs();
  if (sh->is_rest) {
    StartRest(s);
  } else if (sh->is_echo) {
    sh->echo_stubs[s->channel]->async()->Echo(s->ctx.get(), &sh->echo_request, &s->echo_response,
                                              [s](grpc::Status st) { SlotDone(s, st); });
  } else if (sh->is_oip) {
    sh->oip_stubs[s->channel]->async()->ModelInfer(s->ctx.get(), &sh->infer_request,
                                                   &s->infer_response,
                                                   [s](grpc::Status st) { SlotDone(s, st); });
  } else {
    sh->exec_stubs[s->channel]->async()->Execute(s->ctx.get(), &sh->exec_request, &s->exec_response,
                                                 [s](grpc::Status st) { SlotDone(s, st); });
  }
}

// ---- rest, rest_json ------------------------------------------------------

void RestDone(Slot* s, int code);
void RestConnected(Slot* s, const beast::error_code& ec);
void WriteRest(Slot* s);
void RestRead(Slot* s, const beast::error_code& ec);

// A call that got no (whole) answer: its connection's state is unknown, so
// it is dropped and the slot's next call reconnects.
void RestFailed(Slot* s) {
  s->http->close();
  s->connected = false;
  s->rest_buffer.clear();
  s->rest_reply.clear();
  RestDone(s, 0);
}

// Sends this slot's next infer on its keep-alive connection, connecting
// first if there is none (on the slot's io_context thread, or on main before
// the threads start).
void StartRest(Slot* s) {
  // One deadline for the whole call: connect, write and read.
  s->http->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s->sh->opt.deadline_seconds)));
  if (s->connected) {
    WriteRest(s);
    return;
  }
  s->http->async_connect(
      s->sh->rest_endpoints,
      [s](const beast::error_code& ec, const tcp::endpoint&) { RestConnected(s, ec); });
}

void RestConnected(Slot* s, const beast::error_code& ec) {
  if (ec) {
    // The call fails after 1 ms: a closed port is not hammered with connects
    // as fast as they are refused.
    s->http->close();
    s->retry->expires_after(std::chrono::milliseconds(1));
    s->retry->async_wait([s](const beast::error_code&) { RestFailed(s); });
    return;
  }
  // No Nagle: the request's last segment must not wait for the server's
  // delayed ACK (40 ms a call).
  beast::error_code ignored;
  s->http->socket().set_option(tcp::no_delay(true), ignored);
  s->connected = true;
  WriteRest(s);
}

// Writes the request (a gather write of the headers and the shared body, not
// copied), then reads the reply.
void WriteRest(Slot* s) {
  http::async_write(*s->http, s->rest_request, [s](const beast::error_code& ec, size_t) {
    if (ec) {
      RestFailed(s);
      return;
    }
    s->rest_parser.emplace();
    // No limit on the body (Beast's default for a response is 8 MiB): a reply
    // is as big as the request's tensor makes it, and the server bounds that.
    s->rest_parser->body_limit(boost::none);
    std::string& body = s->rest_parser->get().body();
    body = std::move(s->rest_reply);
    body.clear();
    http::async_read(*s->http, s->rest_buffer, *s->rest_parser,
                     [s](const beast::error_code& read_error, size_t) { RestRead(s, read_error); });
  });
}

void RestRead(Slot* s, const beast::error_code& ec) {
  http::response<http::string_body>& reply = s->rest_parser->get();
  s->rest_reply = std::move(reply.body());
  if (ec) {
    RestFailed(s);
    return;
  }
  if (!reply.keep_alive()) {
    // The server closes this connection after the reply.
    s->http->close();
    s->connected = false;
    s->rest_buffer.clear();
  }
  RestDone(s, static_cast<int>(reply.result_int()));
}

// The reply's status is `code` (0: no answer), its body s->rest_reply.
void RestDone(Slot* s, int code) {
  s->rest_reply_bytes = static_cast<int64_t>(s->rest_reply.size());
  grpc::Status status;
  if (code != 200) {
    std::string text = "HTTP " + std::to_string(code);
    if (!s->rest_reply.empty()) {
      text += ": " + s->rest_reply.substr(0, 300);
    } else if (code == 0) {
      text += " (no answer: connection failed or timed out)";
    }
    status = grpc::Status(grpc::StatusCode::UNKNOWN, text);
  }
  SlotDone(s, status);
}

// The reply in s.rest_reply (during RestDone): sizes always, every byte or
// number when `full`.
std::string CheckRestReply(const Slot& s, bool full) {
  const Shared& sh = *s.sh;
  const char* body = s.rest_reply.data();
  const int64_t total = s.rest_reply_bytes;
  const int64_t payload = static_cast<int64_t>(sh.expected.size());
  if (sh.rest_binary) {
    // JSON header, then the output's bytes.
    if (total <= payload) return "reply of " + std::to_string(total) + " bytes is too short";
    if (!full) return "";
    const int64_t json_len = total - payload;
    rapidjson::Document head;
    head.Parse(body, static_cast<size_t>(json_len));
    if (head.HasParseError() || !head.IsObject() || !head.HasMember("outputs")) {
      return "reply's JSON header does not parse (or the binary size is wrong)";
    }
    const rapidjson::Value& out = head["outputs"][0];
    if (std::string(out["datatype"].GetString()) != "FP32") return "reply datatype is not FP32";
    if (out["parameters"]["binary_data_size"].GetInt64() != payload) {
      return "reply's binary_data_size is wrong";
    }
    if (std::memcmp(body + json_len, sh.expected.data(), static_cast<size_t>(payload)) != 0) {
      return "reply bytes differ from the expected output";
    }
    return "";
  }
  if (!full) return total > 0 ? "" : "empty reply";
  rapidjson::Document doc;
  // Full precision: the nearest double of each number, then to FP32, as the
  // server reads them.
  doc.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseNanAndInfFlag>(
      body, static_cast<size_t>(total));
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("outputs")) {
    return "reply JSON does not parse";
  }
  const rapidjson::Value& data = doc["outputs"][0]["data"];
  if (!data.IsArray() || static_cast<int64_t>(data.Size()) != sh.elements) {
    return "reply's data is not an array of " + std::to_string(sh.elements) + " numbers";
  }
  for (int64_t i = 0; i < sh.elements; ++i) {
    const float f = static_cast<float>(data[static_cast<rapidjson::SizeType>(i)].GetDouble());
    if (std::memcmp(&f, sh.expected.data() + i * 4, 4) != 0) {
      return "reply element " + std::to_string(i) + " differs from the expected output";
    }
  }
  return "";
}

// The HTTP body of sh->infer_request (built first): binary blocks after the
// JSON header (rest) or every tensor as a JSON array (rest_json).
void PrepareRest(Shared* sh) {
  const inference::ModelInferRequest& m = sh->infer_request;
  sh->rest_path = "/v2/models/" + m.model_name() + "/infer";
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("parameters");
  w.StartObject();
  for (const auto& [key, value] : m.parameters()) {
    w.Key(key.c_str());
    w.String(value.string_param().c_str());
  }
  if (sh->rest_binary) {
    w.Key("binary_data_output");
    w.Bool(true);
  }
  w.EndObject();
  w.Key("inputs");
  w.StartArray();
  for (int i = 0; i < m.inputs_size(); ++i) {
    const auto& in = m.inputs(i);
    const std::string& raw = m.raw_input_contents(i);
    w.StartObject();
    w.Key("name");
    w.String(in.name().c_str());
    w.Key("datatype");
    w.String(in.datatype().c_str());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : in.shape()) w.Int64(d);
    w.EndArray();
    if (sh->rest_binary) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Int64(static_cast<int64_t>(raw.size()));
      w.EndObject();
    } else {
      w.Key("data");
      w.StartArray();
      const bool fp32 = in.datatype() == "FP32";
      for (size_t k = 0; k + (fp32 ? 4 : 8) <= raw.size(); k += fp32 ? 4 : 8) {
        if (fp32) {
          float f;
          std::memcpy(&f, raw.data() + k, 4);
          w.Double(static_cast<double>(f));  // shortest form; reads back exactly
        } else {
          int64_t v;
          std::memcpy(&v, raw.data() + k, 8);
          w.Int64(v);
        }
      }
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  sh->rest_body.assign(buffer.GetString(), buffer.GetSize());
  sh->rest_header_length = std::to_string(sh->rest_body.size());
  if (sh->rest_binary) {
    for (const std::string& raw : m.raw_input_contents()) sh->rest_body += raw;
  }
}

// Returns "" when the reply is right; checks bytes only when `full`.
std::string CheckReply(const Slot& s, bool full) {
  const Shared& sh = *s.sh;
  const std::string* got = nullptr;
  if (sh.is_rest) return CheckRestReply(s, full);
  if (sh.is_echo) {
    got = &s.echo_response.payload();
  } else if (sh.is_oip) {
    const inference::ModelInferResponse& r = s.infer_response;
    if (r.outputs_size() != 1 || r.raw_output_contents_size() != 1) {
      return "reply has " + std::to_string(r.outputs_size()) + " outputs and " +
             std::to_string(r.raw_output_contents_size()) + " raw_output_contents";
    }
    const inference::ModelInferResponse::InferOutputTensor& t = r.outputs(0);
    if (t.datatype() != "FP32") return "reply datatype is " + t.datatype() + ", not FP32";
    if (t.shape_size() != 1 || t.shape(0) != sh.elements) return "reply shape is wrong";
    got = &r.raw_output_contents(0);
  } else {
    const v1::ExecuteResponse& r = s.exec_response;
    if (r.outputs_size() != 1) return "reply has " + std::to_string(r.outputs_size()) + " outputs";
    const v1::Tensor& t = r.outputs(0);
    if (t.dtype() != v1::DATA_TYPE_FLOAT32) return "reply dtype is not FLOAT32";
    if (t.shape_size() != 1 || t.shape(0) != sh.elements) return "reply shape is wrong";
    got = &t.raw_data();
  }
  if (got->size() != sh.expected.size()) {
    return "reply has " + std::to_string(got->size()) + " bytes, expected " +
           std::to_string(sh.expected.size());
  }
  if (full && std::memcmp(got->data(), sh.expected.data(), got->size()) != 0) {
    return "reply bytes differ from the expected output";
  }
  return "";
}

void SlotDone(Slot* s, const grpc::Status& status) {
  const int64_t done = NowNs();
  if (status.ok()) {
    const bool full = s->sh->opt.verify_every > 0 && s->seq % s->sh->opt.verify_every == 0;
    const std::string problem = CheckReply(*s, full);
    if (full) ++s->verified;
    if (!problem.empty()) {
      ++s->verify_failures;
      if (s->first_error.empty()) s->first_error = "verification: " + problem;
    }
  }
  if (s->measured) {
    if (status.ok()) {
      ++s->ok;
      s->latencies_ns.push_back(done - s->start_ns);
    } else {
      ++s->errors;
      if (s->first_error.empty()) {
        s->first_error = "code " + std::to_string(static_cast<int>(status.error_code())) + ": " +
                         status.error_message();
      }
    }
    s->last_done_ns = done;
  } else {
    ++s->warmup_done;
  }
  StartNext(s);
}

// The 1-D FLOAT32 input: distinct bit patterns so a misplaced element shows.
std::string MakePayload(int64_t bytes) {
  std::string p(static_cast<size_t>(bytes), '\0');
  uint32_t x = 0x9e3779b9u;
  for (int64_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t v = static_cast<uint32_t>(i / 4) * 2654435761u ^ x;
    v &= 0x3fffffffu;  // finite, positive floats: no NaN canonicalisation questions
    std::memcpy(&p[static_cast<size_t>(i)], &v, 4);
  }
  for (int64_t i = bytes - bytes % 4; i < bytes; ++i) p[static_cast<size_t>(i)] = 'x';
  return p;
}

v1::Tensor* AddInt64(v1::ExecuteRequest* r, std::vector<int64_t> shape, int64_t value) {
  v1::Tensor* t = r->add_inputs();
  t->set_dtype(v1::DATA_TYPE_INT64);
  for (int64_t d : shape) t->add_shape(d);
  t->add_int64_data(value);
  return t;
}

bool Prepare(Shared* sh, std::string* error) {
  const Options& o = sh->opt;
  const std::string payload = MakePayload(o.payload_bytes);
  if (sh->is_echo) {
    sh->echo_request.set_payload(payload);
    sh->expected = payload;
    return true;
  }
  if (o.payload_bytes < 4 || o.payload_bytes % 4 != 0) {
    *error = "--payload_bytes must be a positive multiple of 4 for tensorops (FLOAT32)";
    return false;
  }
  const int64_t n = o.payload_bytes / 4;
  sh->elements = n;
  v1::ExecuteRequest& r = sh->exec_request;
  v1::Tensor* data = r.add_inputs();
  data->set_dtype(v1::DATA_TYPE_FLOAT32);
  data->add_shape(n);
  data->set_raw_data(payload);
  sh->expected.assign(payload.size(), '\0');
  if (o.op == "roll") {
    r.set_op("Roll");
    const int64_t shift = n / 3 + 1;
    AddInt64(&r, {}, shift);
    AddInt64(&r, {}, 0);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(&sh->expected[static_cast<size_t>(((i + shift) % n) * 4)], &payload[i * 4], 4);
    }
  } else if (o.op == "reverse") {
    r.set_op("Reverse");
    (*r.mutable_attrs()->mutable_fields())["mode"].set_string_value("index");
    AddInt64(&r, {1}, 0);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(&sh->expected[static_cast<size_t>((n - 1 - i) * 4)], &payload[i * 4], 4);
    }
  } else {
    *error = "--op must be roll or reverse";
    return false;
  }
  if (sh->is_oip || sh->is_rest) {
    // The same tensor and op as a ModelInfer: inputs by name, all raw.
    // Input names as the ops declare them (docs/cookbook.md); attributes
    // become request parameters.
    const std::vector<const char*> names = o.op == "roll"
                                               ? std::vector<const char*>{"data", "shift", "axes"}
                                               : std::vector<const char*>{"data", "axis"};
    inference::ModelInferRequest& m = sh->infer_request;
    m.set_model_name(r.op());
    for (const auto& [key, value] : r.attrs().fields()) {
      (*m.mutable_parameters())[key].set_string_param(value.string_value());
    }
    for (int i = 0; i < r.inputs_size(); ++i) {
      const v1::Tensor& t = r.inputs(i);
      auto* in = m.add_inputs();
      in->set_name(names[static_cast<size_t>(i)]);
      in->set_datatype(i == 0 ? "FP32" : "INT64");
      for (int64_t d : t.shape()) in->add_shape(d);
      if (i == 0) {
        m.add_raw_input_contents(t.raw_data());
      } else {
        const int64_t v = t.int64_data(0);
        m.add_raw_input_contents(reinterpret_cast<const char*>(&v), sizeof(v));
      }
    }
    if (sh->is_rest) PrepareRest(sh);
  }
  return true;
}

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

int Usage(const char* bad) {
  std::fprintf(stderr,
               "usage: load_tool --target=tensorops|oip|rest|rest_json|echo --address=HOST:PORT\n"
               "  [--mode=unary|stream]\n"
               "  stream: [--tensor_bytes=67108864] [--chunk_bytes=1048576] [--calls=3]\n"
               "  [--flow=false] (tensorops: StreamHeader.flow)\n"
               "  unary:"
               " [--op=roll|reverse] [--payload_bytes=4096] [--concurrency=1]\n"
               "  [--channels=0 (min(concurrency,4))] [--warmup_seconds=0.5]\n"
               "  [--warmup_calls=1000000] [--duration_seconds=2] [--max_calls=10000000]\n"
               "  [--verify_every=16] [--deadline_seconds=120] [--traceparent=00-...-01 (gRPC)]\n"
               "  [--max_message_bytes=285212672]\n");
  if (bad != nullptr) std::fprintf(stderr, "bad argument: %s\n", bad);
  return 2;
}

double Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return static_cast<double>(sorted[std::min(i, sorted.size() - 1)]) / 1e3;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// ---- --mode=stream -------------------------------------------------------

// The streamed input is a repeating pattern of kPatternBytes (a prime, so a
// chunk boundary never lines up with a period and a misplaced chunk shows):
// any byte range of the input is a slice of `pattern` (stored twice over so a
// slice of up to kPatternBytes never wraps), and so is any range of the
// Roll's output. No 2 GiB copy of the input or the expected output is needed.
constexpr int64_t kPatternBytes = 1048573;

struct StreamInput {
  std::string pattern;  // 2 x kPatternBytes
  int64_t bytes = 0;
  int64_t shift = 0;  // Roll's shift (tensorops only)
  // Byte i of the input.
  const char* At(int64_t i) const { return pattern.data() + i % kPatternBytes; }
  // How many bytes from input byte i are one contiguous slice of `pattern`.
  int64_t RunAt(int64_t i, int64_t n) const {
    return std::min({n, bytes - i, kPatternBytes - i % kPatternBytes + kPatternBytes});
  }
};

StreamInput MakeStreamInput(int64_t bytes) {
  StreamInput in;
  in.bytes = bytes;
  in.pattern.resize(2 * kPatternBytes);
  uint64_t x = 0x243F6A8885A308D3ull;
  for (int64_t i = 0; i < kPatternBytes; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    in.pattern[i] = in.pattern[i + kPatternBytes] = static_cast<char>(x >> 56);
  }
  in.shift = bytes / 3 + 1;
  return in;
}

// Compares `n` received bytes at output offset `off` with the expected
// output: the input itself (echo) or rolled by in.shift (tensorops).
bool OutputMatches(const StreamInput& in, bool rolled, int64_t off, const char* got, int64_t n) {
  while (n > 0) {
    // out[j] = in[(j - shift) mod bytes]
    int64_t src = off;
    if (rolled) src = ((off - in.shift) % in.bytes + in.bytes) % in.bytes;
    const int64_t run = std::min(in.RunAt(src, n), in.bytes - src);
    if (std::memcmp(got, in.At(src), run) != 0) return false;
    got += run, off += run, n -= run;
  }
  return true;
}

uint32_t Crc32(const char* p, int64_t n, uint32_t crc) {
  while (n > 0) {  // zlib's length is a uInt
    const uInt step = static_cast<uInt>(std::min<int64_t>(n, int64_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(p), step));
    p += step, n -= step;
  }
  return crc;
}

struct StreamResult {
  double seconds = 0;      // first byte sent (after the CRC) to the last one received
  double crc_seconds = 0;  // the input's CRC-32, computed before the header (tensorops)
  int64_t received = 0;
  bool verified = true;
  std::string error;
};

template <typename Request, typename Response>
using Stream = grpc::ClientReaderWriter<Request, Response>;

// Runs `write_all(stream)` (every upload, then WritesDone) on a writer
// thread while this thread reads the replies: `on_reply(resp)` consumes one
// (false on a protocol error: the rest are read and dropped).
template <typename Request, typename Response, typename WriteAll, typename OnReply>
grpc::Status RunOneStream(Stream<Request, Response>* stream, WriteAll write_all, OnReply on_reply) {
  std::thread writer([&] { write_all(stream); });
  Response resp;
  bool ok = true;
  while (stream->Read(&resp)) {
    if (ok && !on_reply(resp)) ok = false;
  }
  writer.join();
  grpc::Status st = stream->Finish();
  if (st.ok() && !ok) return grpc::Status(grpc::StatusCode::DATA_LOSS, "bad reply stream");
  return st;
}

// Input bytes [off, off + n) into *d.
void FillChunk(const StreamInput& in, int64_t off, int64_t n, std::string* d) {
  d->clear();
  for (int64_t k = 0; k < n;) {
    const int64_t run = in.RunAt(off + k, n - k);
    d->append(in.At(off + k), run);
    k += run;
  }
}

StreamResult StreamEcho(eb::Echo::Stub* stub, const StreamInput& in, const Options& o) {
  StreamResult r;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(o.deadline_seconds * 1e6)));
  const int64_t t0 = NowNs();
  auto stream = stub->EchoStream(&ctx);
  const grpc::Status st = RunOneStream(
      stream.get(),
      [&](Stream<eb::EchoChunk, eb::EchoChunk>* w) {
        eb::EchoChunk c;
        for (int64_t off = 0; off < in.bytes; off += o.chunk_bytes) {
          FillChunk(in, off, std::min(o.chunk_bytes, in.bytes - off), c.mutable_data());
          if (!w->Write(c)) return;
        }
        w->WritesDone();
      },
      [&](const eb::EchoChunk& c) {
        const int64_t n = static_cast<int64_t>(c.data().size());
        if (r.received + n > in.bytes ||
            !OutputMatches(in, false, r.received, c.data().data(), n)) {
          r.verified = false;
        }
        r.received += n;
        return true;
      });
  r.seconds = static_cast<double>(NowNs() - t0) / 1e9;
  if (!st.ok()) r.error = "code " + std::to_string(st.error_code()) + ": " + st.error_message();
  if (r.received != in.bytes) r.verified = false;
  return r;
}

void AddScalarInput(v1::StreamHeader* h, v1::DataType dtype, int64_t value, std::string* bytes) {
  v1::TensorHeader* t = h->add_inputs();
  t->set_dtype(dtype);
  bytes->assign(reinterpret_cast<const char*>(&value), 8);  // little-endian INT64
  t->set_crc32(Crc32(bytes->data(), 8, 0));
}

StreamResult StreamTensorOps(v1::TensorOps::Stub* stub, const StreamInput& in, const Options& o) {
  StreamResult r;
  // The protocol wants the input's CRC-32 in the header, before any chunk:
  // a client holding the whole tensor computes it first. Timed separately
  // and included in `seconds`.
  const int64_t c0 = NowNs();
  uint32_t crc = 0;
  for (int64_t off = 0; off < in.bytes;) {
    const int64_t run = in.RunAt(off, in.bytes - off);
    crc = Crc32(in.At(off), run, crc);
    off += run;
  }
  r.crc_seconds = static_cast<double>(NowNs() - c0) / 1e9;
  v1::ExecuteStreamRequest header;
  v1::StreamHeader* h = header.mutable_header();
  h->set_op("Roll");
  v1::TensorHeader* data = h->add_inputs();
  data->set_dtype(v1::DATA_TYPE_UINT8);
  data->add_shape(in.bytes);
  data->set_crc32(crc);
  h->set_flow(o.flow);
  std::string shift_bytes, axes_bytes;
  AddScalarInput(h, v1::DATA_TYPE_INT64, in.shift, &shift_bytes);
  AddScalarInput(h, v1::DATA_TYPE_INT64, 0, &axes_bytes);

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(o.deadline_seconds * 1e6)));
  bool header_seen = false;
  auto stream = stub->ExecuteStream(&ctx);
  const grpc::Status st = RunOneStream(
      stream.get(),
      [&](Stream<v1::ExecuteStreamRequest, v1::ExecuteStreamResponse>* w) {
        if (!w->Write(header)) return;
        // The two 8-byte scalars first (chunks of different inputs may
        // interleave), then the data's chunks in order.
        v1::ExecuteStreamRequest req;
        v1::TensorChunk* c = req.mutable_chunk();
        c->set_tensor(1);
        c->set_data(shift_bytes);
        if (!w->Write(req)) return;
        c->set_tensor(2);
        c->set_data(axes_bytes);
        if (!w->Write(req)) return;
        c->set_tensor(0);
        for (int64_t off = 0; off < in.bytes; off += o.chunk_bytes) {
          c->set_offset(static_cast<uint64_t>(off));
          FillChunk(in, off, std::min(o.chunk_bytes, in.bytes - off), c->mutable_data());
          if (!w->Write(req)) return;
        }
        w->WritesDone();
      },
      [&](const v1::ExecuteStreamResponse& resp) {
        if (resp.has_header()) {
          if (header_seen || resp.header().outputs_size() != 1) return false;
          const v1::TensorHeader& t = resp.header().outputs(0);
          if (t.dtype() != v1::DATA_TYPE_UINT8 || t.shape_size() != 1 || t.shape(0) != in.bytes) {
            return false;
          }
          header_seen = true;
          return true;
        }
        if (resp.has_trailer()) return o.flow && r.received == in.bytes;
        const v1::TensorChunk& c = resp.chunk();
        const int64_t n = static_cast<int64_t>(c.data().size());
        const int64_t at = static_cast<int64_t>(c.offset());
        // Flowing: any offset, each chunk with its CRC; else in order.
        if (!header_seen || c.tensor() != 0 || (o.flow ? at > in.bytes - n : at != r.received) ||
            r.received + n > in.bytes) {
          return false;
        }
        if (o.flow && c.crc32() != Crc32(c.data().data(), n, 0)) r.verified = false;
        if (!OutputMatches(in, true, at, c.data().data(), n)) r.verified = false;
        r.received += n;
        return true;
      });
  r.seconds = static_cast<double>(NowNs() - c0) / 1e9;
  if (!st.ok()) r.error = "code " + std::to_string(st.error_code()) + ": " + st.error_message();
  if (r.received != in.bytes) r.verified = false;
  return r;
}

// --mode=stream: --calls calls one after the other on one channel, one JSON
// line each. GB/s = tensor bytes / seconds (each byte also comes back).
int RunStreamMode(const Options& o) {
  grpc::ChannelArguments args;
  const int max_message =
      static_cast<int>(std::min<int64_t>(o.max_message_bytes, std::numeric_limits<int>::max()));
  args.SetMaxReceiveMessageSize(max_message);
  args.SetMaxSendMessageSize(max_message);
  auto channel = grpc::CreateCustomChannel(o.address, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::fprintf(stderr, "load_tool: cannot connect to %s\n", o.address.c_str());
    return 1;
  }
  const bool echo = o.target == "echo";
  auto echo_stub = eb::Echo::NewStub(channel);
  auto ops_stub = v1::TensorOps::NewStub(channel);
  const StreamInput in = MakeStreamInput(o.tensor_bytes);
  int rc = 0;
  for (int i = 0; i < o.calls; ++i) {
    const StreamResult r =
        echo ? StreamEcho(echo_stub.get(), in, o) : StreamTensorOps(ops_stub.get(), in, o);
    std::printf(
        "{\"mode\":\"stream\",\"target\":\"%s\",\"op\":\"%s\",\"tensor_bytes\":%lld,"
        "\"chunk_bytes\":%lld,\"call\":%d,\"seconds\":%.4f,\"crc_seconds\":%.4f,"
        "\"gb_per_s\":%.3f,\"received\":%lld,\"verified\":%s,\"error\":\"%s\"}\n",
        o.target.c_str(), echo ? "echo" : (o.flow ? "roll_uint8_flow" : "roll_uint8"),
        static_cast<long long>(in.bytes), static_cast<long long>(o.chunk_bytes), i, r.seconds,
        r.crc_seconds, r.seconds > 0 ? static_cast<double>(in.bytes) / r.seconds / 1e9 : 0.0,
        static_cast<long long>(r.received), r.verified ? "true" : "false",
        JsonEscape(r.error).c_str());
    std::fflush(stdout);
    if (!r.error.empty() || !r.verified) {
      std::fprintf(stderr, "load_tool: stream call %d failed: %s%s\n", i, r.error.c_str(),
                   r.verified ? "" : " (output differs from the expected bytes)");
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

namespace {

std::vector<std::unique_ptr<Slot>> MakeSlots(Shared* sh) {
  std::vector<std::unique_ptr<Slot>> slots;
  for (int i = 0; i < sh->opt.concurrency; ++i) {
    auto s = std::make_unique<Slot>();
    s->sh = sh;
    s->channel = i % sh->opt.channels;
    slots.push_back(std::move(s));
  }
  return slots;
}

void WaitForSlots(Shared* sh) {
  std::unique_lock<std::mutex> lock(sh->mu);
  sh->cv.wait(lock, [&] { return sh->active == 0; });
}

int Report(const Shared& sh, const std::vector<std::unique_ptr<Slot>>& slots,
           int64_t request_bytes);

// rest, rest_json: one keep-alive connection per slot; the slots spread over
// --channels io_context threads (as the gRPC targets spread over channels).
int RunRest(Shared* sh, int64_t request_bytes) {
  const Options& o = sh->opt;
  const size_t colon = o.address.rfind(':');
  if (colon == std::string::npos) return Usage("--address (HOST:PORT)");
  sh->rest_host = o.address.substr(0, colon);
  const std::string port = o.address.substr(colon + 1);
  // One io_context per thread: its handlers (a slot's whole call) never run
  // concurrently, so a slot needs no lock.
  std::vector<std::unique_ptr<net::io_context>> ios;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  for (int c = 0; c < o.channels; ++c) {
    ios.push_back(std::make_unique<net::io_context>(1));
    work.push_back(net::make_work_guard(*ios.back()));
  }
  {
    beast::error_code ec;
    tcp::resolver resolver(*ios[0]);
    for (const auto& entry : resolver.resolve(sh->rest_host, port, ec)) {
      sh->rest_endpoints.push_back(entry.endpoint());
    }
    if (ec || sh->rest_endpoints.empty()) {
      std::fprintf(stderr, "load_tool: cannot resolve %s: %s\n", o.address.c_str(),
                   ec.message().c_str());
      return 1;
    }
  }
  http::request<http::span_body<const char>> request{http::verb::post, sh->rest_path, 11};
  request.set(http::field::host, sh->rest_host);
  request.set(http::field::content_type,
              sh->rest_binary ? "application/octet-stream" : "application/json");
  if (sh->rest_binary) request.set("Inference-Header-Content-Length", sh->rest_header_length);
  request.content_length(sh->rest_body.size());
  // By reference: the body is built once and outlives every request.
  request.body() = beast::span<const char>(sh->rest_body.data(), sh->rest_body.size());
  std::vector<std::unique_ptr<Slot>> slots = MakeSlots(sh);
  for (auto& s : slots) {
    s->http = std::make_unique<beast::tcp_stream>(*ios[s->channel]);
    s->retry = std::make_unique<net::steady_timer>(*ios[s->channel]);
    s->rest_request = request;
    // Beast reads min(64 KiB, the buffer's free capacity) a call: room for
    // 64 KiB, so a big body arrives in big steps.
    s->rest_buffer.reserve(size_t{64} << 10);
  }
  sh->active = o.concurrency;
  sh->warm_end_ns = NowNs() + static_cast<int64_t>(o.warmup_seconds * 1e9);
  for (auto& s : slots) StartNext(s.get());  // queued until the threads run
  std::vector<std::thread> threads;
  for (auto& io : ios) threads.emplace_back([&io] { io->run(); });
  WaitForSlots(sh);
  work.clear();
  for (auto& io : ios) io->stop();
  for (std::thread& t : threads) t.join();
  // The streams and timers before their io_contexts.
  for (auto& s : slots) {
    s->rest_parser.reset();
    s->retry.reset();
    s->http.reset();
  }
  ios.clear();
  return Report(*sh, slots, request_bytes);
}

int Report(const Shared& sh, const std::vector<std::unique_ptr<Slot>>& slots,
           int64_t request_bytes) {
  const Options& o = sh.opt;
  std::vector<int64_t> lat;
  int64_t ok = 0, errors = 0, verified = 0, verify_failures = 0, warmup_done = 0, last = 0;
  int64_t reply_bytes = 0;  // rest: the largest HTTP reply body
  std::string first_error;
  for (const auto& s : slots) {
    lat.insert(lat.end(), s->latencies_ns.begin(), s->latencies_ns.end());
    ok += s->ok;
    errors += s->errors;
    verified += s->verified;
    verify_failures += s->verify_failures;
    warmup_done += s->warmup_done;
    last = std::max(last, s->last_done_ns);
    if (first_error.empty()) first_error = s->first_error;
    reply_bytes = std::max(reply_bytes, s->rest_reply_bytes);
  }
  std::sort(lat.begin(), lat.end());
  const double seconds =
      last > 0 ? static_cast<double>(last - sh.measure_start_ns.load()) / 1e9 : 0.0;
  const double rps = seconds > 0 ? static_cast<double>(ok) / seconds : 0.0;
  double mean_us = 0;
  for (int64_t l : lat) mean_us += static_cast<double>(l) / 1e3;
  if (!lat.empty()) mean_us /= static_cast<double>(lat.size());

  std::printf(
      "{\"target\":\"%s\",\"op\":\"%s\",\"payload_bytes\":%lld,\"request_bytes\":%lld,"
      "\"concurrency\":%d,\"channels\":%d,\"warmup_calls\":%lld,\"calls\":%lld,"
      "\"seconds\":%.3f,\"rps\":%.1f,\"payload_mb_per_s\":%.1f,\"p50_us\":%.1f,"
      "\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f,\"errors\":%lld,"
      "\"verified\":%lld,\"verify_failures\":%lld,\"reply_bytes\":%lld,\"first_error\":\"%s\"}\n",
      o.target.c_str(), sh.is_echo ? "echo" : o.op.c_str(), static_cast<long long>(o.payload_bytes),
      static_cast<long long>(request_bytes), o.concurrency, o.channels,
      static_cast<long long>(warmup_done), static_cast<long long>(ok), seconds, rps,
      rps * static_cast<double>(o.payload_bytes) / 1e6, Percentile(lat, 0.50),
      Percentile(lat, 0.90), Percentile(lat, 0.99), lat.empty() ? 0.0 : lat.back() / 1e3, mean_us,
      static_cast<long long>(errors), static_cast<long long>(verified),
      static_cast<long long>(verify_failures), static_cast<long long>(reply_bytes),
      JsonEscape(first_error).c_str());
  std::fflush(stdout);
  if (verify_failures > 0) {
    std::fprintf(stderr, "load_tool: %lld replies failed verification: %s\n",
                 static_cast<long long>(verify_failures), first_error.c_str());
    return 1;
  }
  if (ok == 0) {
    std::fprintf(stderr, "load_tool: no measured call succeeded: %s\n", first_error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

// Reads argv into `o`; returns the argument it does not know, or null.
const char* ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string v;
    const char* a = argv[i];
    if (Flag(a, "--target", &v)) {
      o->target = v;
    } else if (Flag(a, "--mode", &v)) {
      o->mode = v;
    } else if (Flag(a, "--tensor_bytes", &v)) {
      o->tensor_bytes = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--chunk_bytes", &v)) {
      o->chunk_bytes = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--calls", &v)) {
      o->calls = std::atoi(v.c_str());
    } else if (Flag(a, "--address", &v)) {
      o->address = v;
    } else if (Flag(a, "--op", &v)) {
      o->op = v;
    } else if (Flag(a, "--payload_bytes", &v)) {
      o->payload_bytes = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--concurrency", &v)) {
      o->concurrency = std::atoi(v.c_str());
    } else if (Flag(a, "--channels", &v)) {
      o->channels = std::atoi(v.c_str());
    } else if (Flag(a, "--warmup_seconds", &v)) {
      o->warmup_seconds = std::atof(v.c_str());
    } else if (Flag(a, "--warmup_calls", &v)) {
      o->warmup_calls = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--duration_seconds", &v)) {
      o->duration_seconds = std::atof(v.c_str());
    } else if (Flag(a, "--max_calls", &v)) {
      o->max_calls = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--verify_every", &v)) {
      o->verify_every = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--deadline_seconds", &v)) {
      o->deadline_seconds = std::atof(v.c_str());
    } else if (Flag(a, "--traceparent", &v)) {
      o->traceparent = v;
    } else if (Flag(a, "--max_message_bytes", &v)) {
      o->max_message_bytes = std::strtoll(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--flow", &v)) {
      o->flow = v == "true" || v == "1";
    } else {
      return a;
    }
  }
  return nullptr;
}

// The stubs of o.channels channels to o.address (false: one could not
// connect, said on stderr).
bool ConnectChannels(Shared* sh) {
  const Options& o = sh->opt;
  // Separate connections: a distinct channel argument keeps gRPC from sharing
  // one subchannel between the channels.
  const int max_message =
      static_cast<int>(std::min<int64_t>(o.max_message_bytes, std::numeric_limits<int>::max()));
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("tensorops.bench.channel_index", c);
    args.SetMaxReceiveMessageSize(max_message);
    args.SetMaxSendMessageSize(max_message);
    auto channel = grpc::CreateCustomChannel(o.address, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "load_tool: cannot connect to %s\n", o.address.c_str());
      return false;
    }
    if (sh->is_echo) {
      sh->echo_stubs.push_back(eb::Echo::NewStub(channel));
    } else if (sh->is_oip) {
      sh->oip_stubs.push_back(inference::GRPCInferenceService::NewStub(channel));
    } else {
      sh->exec_stubs.push_back(v1::TensorOps::NewStub(channel));
    }
  }

  return true;
}

int main(int argc, char** argv) {
  // Keep the client cheap so that the servers, not the load generator, set the
  // pace: large blocks come from the heap and stay mapped (no fresh page
  // faults per call; mallopt caps the mmap threshold at 32 MiB), one arena.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);
  Shared sh;
  Options& o = sh.opt;
  if (const char* bad = ParseArgs(argc, argv, &o)) return Usage(bad);
  if (o.target != "tensorops" && o.target != "oip" && o.target != "rest" &&
      o.target != "rest_json" && o.target != "echo") {
    return Usage("--target");
  }
  if (o.mode == "stream") {
    if (o.target != "tensorops" && o.target != "echo") {
      return Usage("--target (--mode=stream: tensorops or echo)");
    }
    if (o.tensor_bytes < 1 || o.chunk_bytes < 1 || o.calls < 1) {
      return Usage("--tensor_bytes/--chunk_bytes/--calls");
    }
    return RunStreamMode(o);
  }
  if (o.mode != "unary") return Usage("--mode");
  if (o.concurrency < 1 || o.payload_bytes < 0 || o.duration_seconds <= 0 || o.max_calls < 1) {
    return Usage("--concurrency/--payload_bytes/--duration_seconds/--max_calls");
  }
  if (o.channels <= 0) o.channels = std::min(o.concurrency, 4);
  sh.is_echo = o.target == "echo";
  sh.is_oip = o.target == "oip";
  sh.is_rest = o.target == "rest" || o.target == "rest_json";
  sh.rest_binary = o.target == "rest";
  std::string error;
  if (!Prepare(&sh, &error)) {
    std::fprintf(stderr, "load_tool: %s\n", error.c_str());
    return 2;
  }
  const int64_t request_bytes =
      static_cast<int64_t>(sh.is_rest   ? sh.rest_body.size()
                           : sh.is_echo ? sh.echo_request.ByteSizeLong()
                                        : (sh.is_oip ? sh.infer_request.ByteSizeLong()
                                                     : sh.exec_request.ByteSizeLong()));
  if (sh.is_rest) return RunRest(&sh, request_bytes);

  if (!ConnectChannels(&sh)) return 1;

  std::vector<std::unique_ptr<Slot>> slots = MakeSlots(&sh);
  sh.active = o.concurrency;
  sh.warm_end_ns = NowNs() + static_cast<int64_t>(o.warmup_seconds * 1e9);
  for (auto& s : slots) StartNext(s.get());
  WaitForSlots(&sh);
  return Report(sh, slots, request_bytes);
}
