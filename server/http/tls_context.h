// The HTTPS front door's OpenSSL server context (SSL_CTX), built once at
// start from the same PEM text the gRPC door uses (server/server.cc reads
// --tls_cert, --tls_key and --tls_client_ca once), so both doors present the
// same certificate and accept the same client certificates.
//
// Thread-safety: MakeTlsContext may run on any thread; the context is not
// changed after it returns, and OpenSSL allows SSL_new on it from any thread.
#ifndef TENSOROPS_SERVER_HTTP_TLS_CONTEXT_H_
#define TENSOROPS_SERVER_HTTP_TLS_CONTEXT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX; only tls_context.cc and the transport see OpenSSL

namespace tensorops {

// PEM text, as read from the files the flags name.
struct TlsPem {
  std::string cert_chain;   // --tls_cert: the server certificate, then its intermediates
  std::string private_key;  // --tls_key: unencrypted (nobody could type a passphrase)
  std::string client_ca;    // --tls_client_ca: empty = no client certificate asked for
};

// An SSL_CTX freed with SSL_CTX_free.
using TlsContext = std::shared_ptr<ssl_ctx_st>;

// A server context: TLS 1.2 or later, no renegotiation, the certificate chain
// and its key (checked to match); with a client CA, mutual TLS: a client
// certificate that verifies against that CA is required, else the handshake
// fails. INVALID_ARGUMENT naming the flag and OpenSSL's reason when a PEM
// cannot be used.
absl::StatusOr<TlsContext> MakeTlsContext(const TlsPem& pem);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_TLS_CONTEXT_H_
