"""Each sampler of docs/engines.md's sweep (every llama.cpp sampler with a state or randomness, issue 70) acted on the
rows its audits compared: its plain rows (the rejection run's `rows_b`) against plain decoding at T = 1 with every
sampler off on the same prompt (results/llama_server_audit_match_t1.json's `rows_b` for the chat prompt,
results/llama_server_audit_rejection_t1_repeat.json's for the repetitive one), by the engine audit's own two-sample test
(decoders.audit.engines.sampled.compare_runs, level 0.01) on the first n rows of each. A sampler whose own effect this
test cannot see would make its PASS on both paths say nothing (DRY on the chat prompt); a FAIL here says it acted.

    python results/llama_server_samplers/active.py OUT.json [N]
"""

import json
import sys
from pathlib import Path

from decoders.audit.engines.sampled import compare_runs
from decoders.engines.base import EngineRun
from plumbing.outputs import write_json

ROOT = Path(__file__).resolve().parents[2]
CHAT, REPEAT = "llama_server_audit_match_t1.json", "llama_server_audit_rejection_t1_repeat.json"
SWEEP = tuple(
    (name, CHAT)
    for name in (
        "mirostat1_tau2_eta2",
        "mirostat2_defaults",
        "xtc05_01",
        "typical09",
        "top_n_sigma1",
        "adaptive_p05",
        "dry08",
        "logit_bias",
        "minp01_10k",
        "json_grammar_10k",
    )
) + (("dry08_repeat", REPEAT),)


def run(rows: list) -> EngineRun:
    return EngineRun(tuple(map(tuple, rows)), 1.0)


def main() -> None:
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    results = ROOT / "results"
    rows = []
    for name, reference in SWEEP:
        plain = run(json.loads((results / reference).read_text())["rows_b"][:n])
        path = results / f"llama_server_audit_rejection_{name}.json"
        report = compare_runs(run(json.loads(path.read_text())["rows_b"][:n]), plain, 0.01)
        rows.append(
            {
                "sampler": name,
                "file": path.name,
                "against": reference,
                "p_value": report.p_value,
                "acted": not report.passed,
            }
        )
        print(rows[-1], flush=True)
    write_json(
        out,
        {"n": n, "level": 0.01, "against": "plain decoding, T = 1, every sampler off, the same prompt", "rows": rows},
        command="python " + " ".join(sys.argv),
    )


if __name__ == "__main__":
    main()
