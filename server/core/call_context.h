// What a Call needs to know of its RPC, whatever the front door: the
// caller's credentials, its deadline, whether it gave up. Each door
// implements it over its own request (server/grpc/grpc_call_context.h over
// grpc::CallbackServerContext; the HTTP door over its request).
//
// Thread-safety: the methods are const and may be called from any thread
// while the RPC lives (Call::Run reads deadline() and cancelled() on a pool
// thread).
#ifndef TENSOROPS_SERVER_CORE_CALL_CONTEXT_H_
#define TENSOROPS_SERVER_CORE_CALL_CONTEXT_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/core/trace.h"

namespace tensorops {

class CallContext {
 public:
  virtual ~CallContext() = default;
  // The caller's Authorization value; nullopt when it sent none. The view
  // stays valid while the RPC lives.
  virtual std::optional<absl::string_view> authorization() const = 0;
  // Where the door carries `authorization`, appended to the UNAUTHENTICATED
  // message of a call that sent none ("metadata" on gRPC); empty: nothing.
  virtual absl::string_view authorization_carrier() const { return ""; }
  // When a queued call is dropped with DEADLINE_EXCEEDED; InfiniteFuture(): never.
  virtual absl::Time deadline() const = 0;
  // The caller gave up (cancelled, disconnected): a queued call is dropped.
  virtual bool cancelled() const = 0;
  // The caller marks this call as a retry of an earlier attempt (gRPC's
  // grpc-previous-rpc-attempts), counted in tensorops_retried_calls_total.
  virtual bool retried() const { return false; }
  // The caller's W3C trace context: every "traceparent" and "tracestate"
  // value (gRPC metadata, HTTP header fields), as sent and in order; none
  // when absent. Checked by the Call (server/core/trace.h), never an
  // error. The views are valid while the RPC lives.
  virtual TraceFields trace_fields() const { return {}; }
};

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_CORE_CALL_CONTEXT_H_
