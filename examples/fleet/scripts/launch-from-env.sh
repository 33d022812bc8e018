#!/usr/bin/env bash
# Generic launcher: the connector comes from the environment of the job.
set -eu
: "${MODEL:?set MODEL}"
exec vllm serve "$MODEL" \
  --kv-transfer-config "$KV_TRANSFER_CONFIG" \
  "$@"
