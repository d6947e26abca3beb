#!/usr/bin/env bash
# Writes throwaway test certificates (ECDSA P-256, valid 2 days) into DIR:
#   ca.pem ca.key            the test CA
#   server.pem server.key    server cert signed by it, SAN IP:127.0.0.1, DNS:localhost
#   client.pem client.key    client cert signed by it (clientAuth)
#   other_ca.pem             an unrelated CA (a wrong trust root)
#   other_client.pem .key    a client cert signed by the unrelated CA
# Usage: make_test_certs.sh DIR
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
export OPENSSL_CONF=/dev/null  # no system config: every extension below is explicit

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() {  # ca NAME CN
  key "$1.key"
  cat >"$1.ext" <<EXT
basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign
subjectKeyIdentifier=hash
EXT
  openssl req -new -x509 -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
    -extensions v3 -config <(printf '[req]\ndistinguished_name=dn\n[dn]\n[v3]\n'; cat "$1.ext")
}

leaf() {  # leaf NAME CN CA EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2" \
    -config <(printf '[req]\ndistinguished_name=dn\n[dn]\n')
  printf '%b' "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial \
    -out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
}

ca ca "tensorops test CA"
ca other_ca "tensorops other CA"
leaf server localhost ca \
  'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n'
leaf client tensorops-test-client ca \
  'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
leaf other_client tensorops-other-client other_ca \
  'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
rm -f ./*.csr ./*.ext ./*.srl
openssl verify -CAfile ca.pem server.pem client.pem >/dev/null
