"""The live vLLM verdict table (docs/engines.md, "vLLM"): one vLLM engine (a plain server and a drafting one, started
once) audited at every sampling setting of ``SETTINGS`` by the two-sample test at N samples a side (disjoint seeds),
each verdict written as results/vllm/<method>_<setting>.json with the command that makes it again:

    python3 results/vllm/matrix.py ENGINE_SPEC NAME [--n N] [--speculate K] [SETTING ...]

e.g. ``python3 results/vllm/matrix.py vllm:method=ngram,seqs=64 ngram``. The greedy audit is
``spectheory audit --engine SPEC --temperature 0 --gammas ...`` (results/vllm/*_greedy.json)."""

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from engines import open_engine
from engines.audit import ENGINE_PROMPT, SECOND_SIDE_SEED, engine_side, two_sample_document
from engines.base import EngineSampling
from spectheory.outputs import write_json

HERE = Path(__file__).resolve().parent
#: name -> (sampling, request fields beyond it, stop strings)
SETTINGS = {
    "t1": (EngineSampling(1.0), (), ()),
    "t0.7_top_p0.9": (EngineSampling(0.7, top_p=0.9), (), ()),
    "top_k20": (EngineSampling(1.0, top_k=20), (), ()),
    "penalties": (EngineSampling(1.0, repeat_penalty=1.2), (("presence_penalty", 0.5), ("frequency_penalty", 0.3)), ()),
    "stop": (EngineSampling(1.0), (), ("\n",)),
    "min_p0.1": (EngineSampling(1.0, min_p=0.1), (), ()),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine")
    parser.add_argument("name")
    parser.add_argument("settings", nargs="*", default=list(SETTINGS))
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--speculate", type=int, default=4)
    parser.add_argument("--horizon", type=int, default=4)
    args = parser.parse_args()
    engine = open_engine(args.engine)
    base = engine.options
    try:
        for setting in args.settings:
            sampling, fields, stop = SETTINGS[setting]
            engine.options = replace(base, fields=fields, stop=stop)  # request fields only: the servers are unchanged
            a_text, a = engine_side(engine, ENGINE_PROMPT, sampling, args.n, args.horizon, speculate=args.speculate,
                                    seed=0)
            b_text, b = engine_side(engine, ENGINE_PROMPT, sampling, args.n, args.horizon, speculate=0,
                                    seed=SECOND_SIDE_SEED)
            document, samples, lines = two_sample_document(a_text, a, b_text, b, sampling, 0.01)
            document.update(setting=setting, request_fields=engine.options.request_fields(), speculate=args.speculate,
                            engine_settings=engine.settings(), engine_version=engine.version())
            command = "python3 results/vllm/matrix.py " + shlex.join(
                [args.engine, args.name, setting, "--n", str(args.n), "--speculate", str(args.speculate),
                 "--horizon", str(args.horizon)])
            write_json(HERE / f"{args.name}_{setting}.json", dict(document, **samples), command=command)
            print(f"{setting}: " + "; ".join(lines[1:]), flush=True)
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
