#include "server/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tensorops {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// Drains this thread's OpenSSL error queue into "library: reason; ...", so
// a later call does not report an error of this one.
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* lib = ERR_lib_error_string(e);
    const char* reason = ERR_reason_error_string(e);
    absl::StrAppend(&out, out.empty() ? "" : "; ", lib != nullptr ? lib : "OpenSSL", ": ",
                    reason != nullptr ? reason : absl::StrCat("error ", e));
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

absl::Status Invalid(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what, " (", OpenSslErrors(), ")"));
}

// A passphrase would have to be typed at a terminal: an encrypted key fails
// instead of blocking the start on a prompt.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<BioPtr> Bio(absl::string_view flag, const std::string& pem) {
  if (pem.size() > INT_MAX) return absl::InvalidArgumentError(absl::StrCat(flag, ": too large"));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return Invalid(flag, "cannot buffer the PEM text");
  return bio;
}

// Every certificate in `pem`, in order; other PEM blocks are skipped.
absl::StatusOr<std::vector<X509Ptr>> ReadCertificates(absl::string_view flag,
                                                      const std::string& pem) {
  absl::StatusOr<BioPtr> bio = Bio(flag, pem);
  if (!bio.ok()) return bio.status();
  ERR_clear_error();
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio->get(), nullptr, NoPassphrase, nullptr)) {
    certs.emplace_back(x);
  }
  // Reading ends at the end of the text with "no start line"; any other
  // error is a certificate that does not parse.
  const unsigned long last = ERR_peek_last_error();
  if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
    ERR_clear_error();
  }
  if (ERR_peek_error() != 0) return Invalid(flag, "a PEM certificate in it does not parse");
  if (certs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": no PEM certificate in it"));
  }
  return certs;
}

}  // namespace

absl::StatusOr<TlsContext> MakeTlsContext(const TlsPem& pem) {
  ERR_clear_error();
  TlsContext ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("SSL_CTX_new: ", OpenSslErrors()));
  }
  SSL_CTX* c = ctx.get();
  // TLS 1.0 and 1.1 are deprecated (RFC 8996); client-initiated
  // renegotiation lets one peer make the server redo handshakes at will.
  if (SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) != 1) {
    return absl::InternalError(absl::StrCat("SSL_CTX_set_min_proto_version: ", OpenSslErrors()));
  }
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);

  absl::StatusOr<std::vector<X509Ptr>> chain = ReadCertificates("--tls_cert", pem.cert_chain);
  if (!chain.ok()) return chain.status();
  if (SSL_CTX_use_certificate(c, chain->front().get()) != 1) {
    return Invalid("--tls_cert", "the certificate cannot be used");
  }
  for (size_t i = 1; i < chain->size(); ++i) {
    if (SSL_CTX_add1_chain_cert(c, (*chain)[i].get()) != 1) {
      return Invalid("--tls_cert", absl::StrCat("chain certificate ", i, " cannot be used"));
    }
  }

  absl::StatusOr<BioPtr> key_bio = Bio("--tls_key", pem.private_key);
  if (!key_bio.ok()) return key_bio.status();
  PkeyPtr key(PEM_read_bio_PrivateKey(key_bio->get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) return Invalid("--tls_key", "not an unencrypted PEM private key");
  if (SSL_CTX_use_PrivateKey(c, key.get()) != 1 || SSL_CTX_check_private_key(c) != 1) {
    return Invalid("--tls_key", "does not match the certificate of --tls_cert");
  }

  if (!pem.client_ca.empty()) {
    absl::StatusOr<std::vector<X509Ptr>> cas = ReadCertificates("--tls_client_ca", pem.client_ca);
    if (!cas.ok()) return cas.status();
    X509_STORE* store = SSL_CTX_get_cert_store(c);
    for (const X509Ptr& ca : *cas) {
      // The store verifies client chains; the CA list tells clients which
      // issuers the server accepts (CertificateRequest).
      if (X509_STORE_add_cert(store, ca.get()) != 1 || SSL_CTX_add_client_CA(c, ca.get()) != 1) {
        return Invalid("--tls_client_ca", "a CA certificate cannot be used");
      }
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Session resumption with client verification needs an id context, else
    // OpenSSL fails every resumed handshake.
    static constexpr unsigned char kSessionContext[] = "tensorops-http";
    if (SSL_CTX_set_session_id_context(c, kSessionContext, sizeof(kSessionContext) - 1) != 1) {
      return absl::InternalError(absl::StrCat("SSL_CTX_set_session_id_context: ", OpenSslErrors()));
    }
  }
  return ctx;
}

}  // namespace tensorops
