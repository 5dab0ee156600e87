"""The one-sample audit of live vLLM samples (docs/engines.md, "vLLM"): the rows of a two-sample verdict file of
results/vllm (``matrix.py``'s ``<method>_<setting>.json``), the drafting server's and, as the control, the plain
server's, each audited against the target's own law (``spectheory audit --against model``'s audit: our float32
model of the GGUF vLLM serves, the statistical audit of docs/theory.md §8), beside the numeric difference alone
(the total variation per position between vLLM's own log-probabilities, ``logprobs=-1`` on a plain server, and
ours) and the two-sample test's detectable TV. The rows that reached the end of sequence within the horizon (1 or
2 in 4,000 here) are left out and counted: the audit's law is over whole horizons, so it then holds the rest
against a law with that much mass (under 0.001, far below what 4,000 samples detect) that they cannot reach.
Written as ``<method>_<setting>_one_sample.json`` with the command that makes it again:

    python3 results/vllm/one_sample.py results/vllm/ngram_patched_t1.json ... [--options eager=1,seqs=64]
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

from decoders.audit.engines.model import against_model, check_model_law
from decoders.audit.engines.request import ENGINE_PROMPT
from decoders.engines import open_engine
from decoders.engines.base import END, EngineRun
from plumbing.outputs import write_json

HERE = Path(__file__).resolve().parent


def _audited(engine, verdict: Path, options: str, level: float, settings: dict) -> None:
    """One verdict file's sides audited against the model, written beside it, and printed."""
    document = json.loads(verdict.read_text())
    sampling = settings[document["setting"]][0]
    check_model_law(sampling)
    found = {}
    for side in ("a", "b"):
        rows = [tuple(row) for row in document[f"rows_{side}"]]
        whole = tuple(row for row in rows if END not in row)
        prompt = document.get("prompt", ENGINE_PROMPT)  # matrix.py's prompt; ENGINE_PROMPT in older files
        found[side] = dict(
            against_model(engine, prompt, EngineRun(whole, 0.0), sampling, level=level, seed=0),
            ended_early=len(rows) - len(whole),
        )
    out = {
        "verdict": verdict.name,
        "setting": document["setting"],
        "sampling": sampling.describe(),
        "level": level,
        "a": document["a"],
        "b": document["b"],
        "two_sample": {
            "p_value": document["p_value"],
            "detectable_tv": document["detectable_tv"],
            "passed": document["passed"],
        },
        "one_sample": found,
    }
    write_json(
        verdict.with_name(verdict.stem + "_one_sample.json"),
        out,
        command="python3 results/vllm/one_sample.py " + shlex.join([str(verdict), "--options", options]),
    )
    for side in ("a", "b"):
        audit = found[side]
        print(
            f"{document[side]}: one-sample {'PASS' if audit['passed'] else 'FAIL'}, detectable TV "
            f"{audit['detectable_tv']}; numeric TV per position {[round(t, 5) for t in audit['numeric_tv']]}",
            flush=True,
        )
    print(f"two-sample: p = {document['p_value']:.3g}, detectable TV {document['detectable_tv']:.3f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("verdicts", type=Path, nargs="+")
    parser.add_argument("--options", default="eager=1,seqs=64")
    parser.add_argument("--level", type=float, default=0.01)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from matrix import SETTINGS

    engine = open_engine(f"vllm:method=none,{args.options}")  # one plain server; its logits kept across files
    try:
        for verdict in args.verdicts:
            _audited(engine, verdict, args.options, args.level, SETTINGS)
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
