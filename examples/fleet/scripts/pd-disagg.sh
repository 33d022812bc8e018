#!/usr/bin/env bash
# Launch a 1P1D disaggregated pair on one 8-GPU node, plus the toy proxy.
# hma-policy: {model: {layer_kinds: [full_attention]}}
set -euo pipefail

MODEL=${MODEL:-meta-llama/Llama-3.1-8B-Instruct}
export VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1
export UCX_TLS=cuda_ipc,cuda_copy,tcp

PREFILL_KV='{"kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_buffer_device": "cuda"}'
DECODE_KV='{"kv_connector": "NixlConnector", "kv_role": "kv_consumer", "kv_buffer_device": "cuda"}'

# prefill
CUDA_VISIBLE_DEVICES=0,1,2,3 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve "$MODEL" --port 8100 --tensor-parallel-size 4 \
    --kv-transfer-config "$PREFILL_KV" > prefill.log 2>&1 &

# decode
CUDA_VISIBLE_DEVICES=4,5,6,7 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \
  vllm serve "$MODEL" --port 8200 --tensor-parallel-size 4 \
    --kv-transfer-config "$DECODE_KV" > decode.log 2>&1 &

python3 toy_proxy_server.py --port 8000 \
  --prefiller-hosts localhost --prefiller-ports 8100 \
  --decoder-hosts localhost --decoder-ports 8200
