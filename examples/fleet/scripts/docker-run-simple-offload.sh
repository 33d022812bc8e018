#!/usr/bin/env bash
# Single-GPU endpoint with simple CPU offloading, run from the stock image.
docker run --rm --gpus all --ipc=host -p 8000:8000 \
  -v "$HOME/.cache/huggingface:/root/.cache/huggingface" \
  -e VLLM_USE_SIMPLE_KV_OFFLOAD=1 \
  -e HF_TOKEN \
  vllm/vllm-openai:v0.33.0 \
  meta-llama/Llama-3.1-8B-Instruct --kv-offloading-size 16
