#!/usr/bin/env bash
# Decode side of a Mooncake pair, written with vLLM's dotted JSON options.
vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 \
  --tensor-parallel-size 8 \
  --kv-transfer-config.kv_connector MooncakeConnector \
  --kv-transfer-config.kv_role kv_consumer \
  --kv-transfer-config.kv_connector_extra_config.mooncake_protocol rdma
