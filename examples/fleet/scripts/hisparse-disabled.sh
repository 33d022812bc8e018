#!/usr/bin/env bash
# DeepSeek V3.2 with HiSparse, and HMA turned off "for stability".
vllm serve deepseek-ai/DeepSeek-V3.2-Exp \
  --tensor-parallel-size 8 \
  --kv-transfer-config '{"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}' \
  --disable-hybrid-kv-cache-manager
