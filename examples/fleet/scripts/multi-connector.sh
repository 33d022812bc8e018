#!/bin/bash
# Decode replica: NIXL for P/D transfer plus native CPU offloading, through
# the OpenAI API server module.
python3 -m vllm.entrypoints.openai.api_server \
  --model Qwen/Qwen3-32B \
  --port 8000 \
  --kv-transfer-config '{
    "kv_connector": "MultiConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {
      "connectors": [
        {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
        {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
         "kv_connector_extra_config": {"cpu_bytes_to_use": 68719476736}}
      ]
    }
  }'
