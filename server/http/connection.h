// One HTTP connection of the transport (server/http/http_transport.h), on
// Boost.Beast: reads each request whole (header, then body, against the
// deadlines and the in-flight budget), hands it to the protocol's handler,
// writes its answer. Only the transport includes this.
//
// Thread-safety: a connection runs on its loop's thread only; ServeConnection
// is called on the acceptor's.
#ifndef TENSOROPS_SERVER_HTTP_CONNECTION_H_
#define TENSOROPS_SERVER_HTTP_CONNECTION_H_

#include "boost/asio/ip/tcp.hpp"
#include "server/core/call.h"
#include "server/http/connection_table.h"
#include "server/http/http_message.h"
#include "server/http/transport_options.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace tensorops {

// What every connection of one transport shares; set before its loops
// start, read-only after, and it outlives them.
struct ConnectionEnv {
  const HttpTransportOptions* options;
  CallPipeline* pipeline;  // bodies count against its in-flight budget
  ConnectionTable* table;
  const HttpProtocol* protocol;
};

// Serves `socket` (accepted on its loop's io_context, which runs the
// connection): HTTPS when `tls` is set (it must outlive the connection),
// else HTTP. `counted`: admitted under the cap (ConnectionTable::Admit's
// kOpen), else refused (kRefuse: 503 and close).
void ServeConnection(const ConnectionEnv* env, boost::asio::ip::tcp::socket socket,
                     boost::asio::ssl::context* tls, bool counted);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_CONNECTION_H_
