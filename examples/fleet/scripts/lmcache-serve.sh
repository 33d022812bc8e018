#!/bin/sh
# Gemma 3 with the shared LMCache config, HMA turned off on purpose while the
# LMCache rollout is evaluated.
# hma-policy: {model: {layer_kinds: [sliding_window, full_attention]}}
export LMCACHE_CONFIG_FILE=/etc/lmcache/lmcache.yaml
exec vllm serve google/gemma-3-27b-it \
  --config ../vllm-configs/lmcache-base.yaml \
  --disable-hybrid-kv-cache-manager \
  --port 8000
