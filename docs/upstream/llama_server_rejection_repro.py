#!/usr/bin/env python3
"""llama-server's rejection-sampling verifier (--spec-draft-sampling probabilistic) changes the output law under
the samplers that carry a state moved by the token they draw: at each verified position the sampler chain is run to
read the target's distribution (common_sampler_sample inside common_sampler_sample_and_accept_n_rejection), and
then another token is emitted there (the accepted draft or the residual draw).

- mirostat-2 (default): Mirostat 2 moves mu by the token it drew, inside apply; the next position is truncated by a
  mu that does not belong to the emitted text (tau 2, eta 2: a strong learning rate makes the effect large).
- adaptive-p: adaptive-p moves its moving average in accept only when the emitted token is the one it drew, so under
  rejection sampling it skips the emitted tokens (target 0.5, decay 0: the average is the last token's probability,
  which makes the effect large; the chain is temperature then adaptive-p); and a chain ending in adaptive-p seeds the
  verifier's generator alike in every request.
- adaptive-p-top-k: the same after top-k 3. Over the whole vocabulary adaptive-p at target 0.5 is nearly uniform,
  so the average is tiny whichever token moves it and the skipped average hardly shows; among three candidates the
  adapted target decides which one is drawn.
- adaptive-p-off: adaptive-p named in the chain at target -1 (off: it samples the distribution as it is, with no
  average to move), so only the seed defect is left: the chain still ends in adaptive-p and reports no seed.

Starts two servers of one build on one model, one plain and one speculating with the model as its own draft,
draws N seeded samples of 4 tokens from each, and compares the two samples by chi-square tests of homogeneity: their
prefixes of 1 to 4 tokens, then the token at each position. Needs only python3 (standard library). Usage:

    llama_server_rejection_repro.py LLAMA_SERVER MODEL.gguf [N] [mirostat-2|adaptive-p|adaptive-p-top-k|adaptive-p-off]
                                             (LD_LIBRARY_PATH naming the build's lib folder if it needs one)

Plain decoding against itself (two seed ranges) is printed first as the control; it should pass. Each server's
output is kept in llama-server-PORT.log in the working directory; a flag the build does not list in its --help, or
a server that exits before it is healthy, stops the run with the log's last lines. The prefixes are tested at each
length, 1 to 4 tokens; a test left with fewer than two cells of 10 pooled counts (every prefix distinct, or all
the same) has nothing to compare and says so instead of printing a p-value.
"""

import collections
import json
import math
import subprocess
import sys
import time
import urllib.request

PROMPT = "<|im_start|>user\nTell me something.<|im_end|>\n<|im_start|>assistant\n"
COMMON = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "n_predict": 4,
    "cache_prompt": False,
    "return_tokens": True,
}
SAMPLERS = {
    "mirostat-2": {"mirostat": 2, "mirostat_tau": 2.0, "mirostat_eta": 2.0},
    "adaptive-p": {"adaptive_target": 0.5, "adaptive_decay": 0.0, "samplers": ["temperature", "adaptive_p"]},
    "adaptive-p-top-k": {
        "adaptive_target": 0.5,
        "adaptive_decay": 0.0,
        "top_k": 3,
        "samplers": ["top_k", "temperature", "adaptive_p"],
    },
    "adaptive-p-off": {"adaptive_target": -1.0, "samplers": ["temperature", "adaptive_p"]},
}
PER_REQUEST = 8


def check_flags(server: str, flags: list) -> None:
    """Stop before any server starts if the build's --help does not list one of ``flags``."""
    listed = subprocess.run([server, "--help"], capture_output=True, text=True, timeout=120)
    missing = [flag for flag in flags if flag.startswith("-") and flag not in listed.stdout + listed.stderr]
    if missing:
        raise SystemExit(f"{server} --help does not list {', '.join(missing)}: another llama.cpp version?")


def _tail(path: str, lines: int = 15) -> str:
    with open(path, encoding="utf-8", errors="replace") as log:
        return "".join(log.readlines()[-lines:])


def start(server: str, model: str, port: int, extra: list) -> subprocess.Popen:
    command = [server, "-m", model, "-np", str(PER_REQUEST), "-t", "2", "--port", str(port), "--no-cache-prompt"]
    check_flags(server, command[1:] + extra)
    log = f"llama-server-{port}.log"
    with open(log, "w") as out:
        process = subprocess.Popen(command + extra, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        if process.poll() is not None:
            raise SystemExit(f"server on port {port} exited with code {process.returncode}; {log} ends:\n{_tail(log)}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"server on port {port} not healthy after 300 s; {log} ends:\n{_tail(log)}")


def samples(port: int, n: int, seed: int, sampler: dict) -> list:
    rows = []
    for start_seed in range(seed, seed + n, PER_REQUEST):
        body = dict(COMMON, **sampler, prompt=PROMPT, seed=start_seed, n_cmpl=PER_REQUEST)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        answers = json.load(urllib.request.urlopen(request, timeout=600))
        rows += [tuple(answer["tokens"]) for answer in answers]
    return rows[:n]


def chi_square_p(a: list, b: list) -> tuple:
    """Homogeneity of two samples' categories (cells with fewer than 10 pooled counts merged): (statistic, dof, p)."""
    ca, cb = collections.Counter(a), collections.Counter(b)
    cells, rare = [], [0, 0]
    for key in set(ca) | set(cb):
        if ca[key] + cb[key] >= 10:
            cells.append((ca[key], cb[key]))
        else:
            rare[0], rare[1] = rare[0] + ca[key], rare[1] + cb[key]
    if sum(rare):
        cells.append(tuple(rare))
    na, nb = len(a), len(b)
    statistic = sum(
        (x - (x + y) * na / (na + nb)) ** 2 / ((x + y) * na / (na + nb))
        + (y - (x + y) * nb / (na + nb)) ** 2 / ((x + y) * nb / (na + nb))
        for x, y in cells
    )
    dof = len(cells) - 1
    if dof < 1:  # one category: nothing to compare
        return statistic, dof, None
    z = ((statistic / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))  # Wilson-Hilferty
    return statistic, dof, 0.5 * math.erfc(z / math.sqrt(2))


def main() -> None:
    if len(sys.argv) < 3 or len(sys.argv) > 4 and sys.argv[4] not in SAMPLERS:
        raise SystemExit(__doc__)
    server, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    sampler = SAMPLERS[sys.argv[4] if len(sys.argv) > 4 else "mirostat-2"]
    plain = start(server, model, 18441, [])
    spec = start(
        server,
        model,
        18442,
        [
            "--spec-type",
            "draft-simple",
            "-md",
            model,
            "--spec-draft-n-max",
            "4",
            "--spec-draft-sampling",
            "probabilistic",
        ],
    )
    try:
        a = samples(18441, n, 0, sampler)
        b = samples(18441, n, 10**6, sampler)
        c = samples(18442, n, 10**6, sampler)
    finally:
        plain.kill(), spec.kill()
    for name, other in (("plain against plain (control)", b), ("plain against speculating", c)):
        print(f"{name}:")
        for length in range(1, 5):  # the prefix of each length: the longest alone may have no cell of 10 counts
            test = chi_square_p(*([row[:length] for row in rows] for rows in (a, other)))
            print(
                f"    {length}-token prefixes, {len({row[:length] for row in a})} and "
                f"{len({row[:length] for row in other})} distinct: " + described(*test)
            )
        for position in range(4):
            test = chi_square_p(
                *([row[position] if position < len(row) else "end" for row in rows] for rows in (a, other))
            )
            print(f"    token {position + 1}: " + described(*test))


def described(statistic: float, dof: int, p: float | None) -> str:
    if p is None:
        return "fewer than two cells of 10 pooled counts: nothing to test"
    return f"chi-square {statistic:.1f} on {dof} degrees of freedom, p = {p:.3g}"


if __name__ == "__main__":
    main()
