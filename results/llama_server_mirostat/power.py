"""The audit's power against llama.cpp's Mirostat bug where users meet it, measured by subsampling: from the 10,000
rows a side of the unpatched rejection path and of plain decoding (Mirostat 2, tau 2, eta 2, the chat prompt "Tell me
something.", results/llama_server_audit_rejection_mirostat2_tau2_eta2_10k.json), draw `repeats` disjoint-seeded
subsamples of n rows a side without replacement and run the engine audit's own two-sample test
(engines.audit.compare_runs, level 0.01) on each; the fraction that fails is the power at n. The patched build's
rows against the same plain rows are the control (its failure rate estimates the false-positive rate, <= 0.01).

    python results/llama_server_mirostat/power.py OUT.json [REPEATS]

Subsamples of one pool of 10,000 overlap, so power near n = 10,000 is overstated; the n where power crosses 90%
is well below that (the rows it prints), where overlap is small."""

import json
import random
import sys
from pathlib import Path

from engines.audit import compare_runs
from engines.base import EngineRun
from spectheory.outputs import write_json

ROOT = Path(__file__).resolve().parents[2]
SIZES = (250, 500, 750, 1000, 1500, 2000, 3000)


def power(rows_a: list, rows_b: list, n: int, repeats: int, seed: int) -> float:
    generator = random.Random(seed)
    failed = 0
    for _ in range(repeats):
        a = EngineRun(tuple(map(tuple, generator.sample(rows_a, n))), 1.0)
        b = EngineRun(tuple(map(tuple, generator.sample(rows_b, n))), 1.0)
        failed += not compare_runs(a, b, 0.01).passed
    return failed / repeats


def main() -> None:
    out, repeats = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100
    results = ROOT / "results"
    unpatched, patched = (json.loads((results / f"llama_server_audit_rejection_mirostat2_tau2_eta2_10k{end}.json")
                                     .read_text()) for end in ("", "_patched"))
    rows = []
    for n in SIZES:
        row = {"n": n, "power": power(unpatched["rows_a"], unpatched["rows_b"], n, repeats, n),
               "control_failure_rate": power(patched["rows_a"], patched["rows_b"], n, repeats, n + 1)}
        rows.append(row)
        print(row, flush=True)
    write_json(out, {"prompt": "chat: Tell me something.", "sampling": "mirostat 2, tau 2, eta 2, T = 1", "horizon": 4,
                     "level": 0.01, "repeats": repeats, "rows": rows, "pool": 10_000},
               command="python " + " ".join(sys.argv))


if __name__ == "__main__":
    main()
