#!/usr/bin/env bash
# Bearer token file (re-read per request) and HTTPS with kubectl and curl.
. "$(dirname "$0")/lib.sh"

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 1 \
    -subj /CN=standin -addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1
printf '  first-token\n' >"$TMP/token"
standin_start --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --token-file "$TMP/token"
CURL_EXTRA="--cacert $TMP/cert.pem"

TOKEN=wrong req GET /api/v1/namespaces
expect_eq "wrong token" '401 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}' "$CODE $BODY"
CODE=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$TMP/cert.pem" "$S/version")
expect_eq "no token" 401 "$CODE"
TOKEN=first-token req GET /api/v1/namespaces
expect_eq "trimmed token accepted over TLS" 200 "$CODE"

printf 'second-token\n' >"$TMP/token"
TOKEN=first-token req GET /api/v1/namespaces
expect_eq "rotated: old token refused" 401 "$CODE"
TOKEN=second-token req GET /api/v1/namespaces
expect_eq "rotated: new token accepted" 200 "$CODE"
CODE=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$TMP/cert.pem" "$S/standin/stats")
expect_eq "control endpoint needs no token" 200 "$CODE"

CODE=$(curl -s -o /dev/null -w '%{http_code}' "$S/version")
expect_eq "untrusted certificate refused by curl" 000 "$CODE"

# kubectl over HTTPS with the CA and the token
write_kubeconfig second-token "$TMP/cert.pem"
expect_eq "kubectl over TLS" 'namespace/default namespace/kube-system' "$(timeout 30 kubectl get ns -o name 2>&1 | tr '\n' ' ' | sed 's/ $//')"
sed -i 's/second-token/bad/' "$KUBECONFIG"
expect_match "kubectl with bad token" 'Unauthorized|must be logged in' "$(timeout 30 kubectl get ns 2>&1)"

finish
