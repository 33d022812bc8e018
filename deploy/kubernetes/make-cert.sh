#!/usr/bin/env bash
# A self-signed CA and a serving certificate for the webhook's Service, for
# trying the webhook out (use cert-manager or your own CA in production).
#
#   deploy/kubernetes/make-cert.sh [OUT_DIR] [SERVICE] [NAMESPACE] [DAYS]
#
# Writes OUT_DIR/ca.crt, ca.key, tls.crt, tls.key (default OUT_DIR: ./certs;
# SERVICE hma-policy, NAMESPACE hma-policy, DAYS 365), then prints the
# commands that put them into the cluster. The certificate names the
# Service's DNS names (SERVICE.NAMESPACE.svc and its longer forms), which the
# API server checks, and, for trying it on this machine, localhost and
# 127.0.0.1.
set -euo pipefail

out="${1:-certs}"
service="${2:-hma-policy}"
namespace="${3:-hma-policy}"
days="${4:-365}"

case "$days" in
  ''|*[!0-9]*) echo "make-cert.sh: DAYS must be a whole number, got \`$days\`" >&2; exit 2 ;;
esac
for name in "$service" "$namespace"; do
  # DNS labels (RFC 1123): what a Service and a namespace may be called.
  if ! [[ "$name" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
    echo "make-cert.sh: \`$name\` is not a Kubernetes name (lower-case letters, digits, -)" >&2
    exit 2
  fi
done

mkdir -p -- "$out"
umask 077
work="$(mktemp -d)"
trap 'rm -rf -- "$work"' EXIT

cat > "$work/ext.cnf" <<CONF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:${service}, DNS:${service}.${namespace}, DNS:${service}.${namespace}.svc, DNS:${service}.${namespace}.svc.cluster.local, DNS:localhost, IP:127.0.0.1
CONF

openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days "$days" \
  -subj "/CN=hma-policy webhook CA" \
  -addext "basicConstraints = critical, CA:TRUE" -addext "keyUsage = critical, keyCertSign, cRLSign" \
  -keyout "$out/ca.key" -out "$out/ca.crt" 2>/dev/null
openssl req -new -nodes -newkey rsa:2048 -sha256 \
  -subj "/CN=${service}.${namespace}.svc" \
  -keyout "$out/tls.key" -out "$work/tls.csr" 2>/dev/null
openssl x509 -req -sha256 -days "$days" -in "$work/tls.csr" \
  -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial -CAserial "$work/ca.srl" \
  -extfile "$work/ext.cnf" -out "$out/tls.crt" 2>/dev/null
chmod 0644 -- "$out/ca.crt" "$out/tls.crt"

ca_bundle="$(base64 < "$out/ca.crt" | tr -d '\n')"
cat <<DONE
wrote $out/ca.crt, $out/ca.key, $out/tls.crt, $out/tls.key
next:
  kubectl apply -f deploy/kubernetes/namespace.yaml
  kubectl -n '$namespace' create secret tls hma-policy-tls --cert='$out/tls.crt' --key='$out/tls.key'
  kubectl apply -k deploy/kubernetes
  kubectl patch validatingwebhookconfiguration hma-policy --type=json \\
    -p='[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "$ca_bundle"}]'
DONE
