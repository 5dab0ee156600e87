"""The audit's power against llama.cpp's Mirostat bug where users meet it, measured by subsampling: from the 10,000 rows
a side of the unpatched rejection path and of plain decoding (Mirostat 2, tau 2, eta 2; by default the chat prompt "Tell
me something.", results/llama_server_audit_rejection_mirostat2_tau2_eta2_10k.json), draw `repeats` disjoint-seeded
subsamples of n rows a side without replacement and run the engine audit's own two-sample test
(decoders.audit.engines.sampled.compare_runs, level 0.01) on each; the fraction that fails is the power at n. The
control estimates the false-positive rate (<= 0.01): the patched build's rows against the same plain rows where a
patched run is given, otherwise the plain rows against themselves, split into two disjoint halves (so only n up to half
the pool).

    python results/llama_server_mirostat/power.py OUT.json [REPEATS [UNPATCHED.json PROMPT-NAME [PATCHED.json]]]

Subsamples of one pool of 10,000 overlap, so power near n = 10,000 is overstated; the n where power crosses 90%
is well below that (the rows it prints), where overlap is small."""

import json
import random
import sys
from pathlib import Path

from decoders.audit.engines.sampled import compare_runs
from decoders.engines.base import EngineRun
from plumbing.outputs import write_json

ROOT = Path(__file__).resolve().parents[2]
SIZES = (250, 500, 750, 1000, 1500, 2000, 3000)
LARGE_SIZES = (4000, 5000)  # where the effect is small: only with the plain rows split in halves


def power(rows_a: list, rows_b: list, n: int, repeats: int, seed: int) -> float:
    generator = random.Random(seed)
    failed = 0
    for _ in range(repeats):
        a = EngineRun(tuple(map(tuple, generator.sample(rows_a, n))), 1.0)
        b = EngineRun(tuple(map(tuple, generator.sample(rows_b, n))), 1.0)
        failed += not compare_runs(a, b, 0.01).passed
    return failed / repeats


def main() -> None:
    args = sys.argv[1:]
    out, repeats = args[0], int(args[1]) if len(args) > 1 else 100
    if len(args) > 2:
        unpatched_path, prompt, patched_path = args[2], args[3], args[4] if len(args) > 4 else None
    else:
        stem = ROOT / "results" / "llama_server_audit_rejection_mirostat2_tau2_eta2_10k"
        unpatched_path, prompt, patched_path = f"{stem}.json", "chat: Tell me something.", f"{stem}_patched.json"
    unpatched = json.loads(Path(unpatched_path).read_text())
    plain = unpatched["rows_b"]
    control = json.loads(Path(patched_path).read_text())["rows_a"] if patched_path else None
    halves = (plain[: len(plain) // 2], plain[len(plain) // 2 :])
    rows = []
    for n in SIZES if control else [n for n in SIZES + LARGE_SIZES if n <= len(plain) // 2]:
        row = {
            "n": n,
            "power": power(unpatched["rows_a"], plain, n, repeats, n),
            "control_failure_rate": power(control, plain, n, repeats, n + 1)
            if control
            else power(*halves, n, repeats, n + 1),
        }
        rows.append(row)
        print(row, flush=True)
    write_json(
        out,
        {
            "prompt": prompt,
            "sampling": "mirostat 2, tau 2, eta 2, T = 1",
            "horizon": 4,
            "level": 0.01,
            "repeats": repeats,
            "rows": rows,
            "pool": len(plain),
            "control": "patched build against the plain rows"
            if control
            else "plain rows against plain rows, disjoint halves",
            "whole_pool_p": unpatched["p_value"],
        },
        command="python " + " ".join(sys.argv),
    )


if __name__ == "__main__":
    main()
