"""The live vLLM verdict table (docs/engines.md, "vLLM"): a plain vLLM server and one drafting server per method,
each started once, audited at every sampling setting of ``SETTINGS`` by the two-sample test at N samples a side
(disjoint seeds; each setting's plain side drawn once and held against every method), each verdict written as
results/vllm/<method>_<setting>.json with the command that makes it again:

    python3 results/vllm/matrix.py [--n N] [--horizon H] [--speculate K] [--options OPTS] NAME=SPEC ... \
        [--settings S ...]

e.g. ``python3 results/vllm/matrix.py ngram=method=ngram draft16=method=draft_model,draft-layers=16 --settings t1``,
where each SPEC is the part of ``--engine vllm:SPEC`` after the colon and ``--options`` (default ``eager=1,seqs=64``) is
added to every engine, the plain one (``method=none``) included. The greedy audit is ``spectheory audit --engine
vllm:SPEC --temperature 0 --gammas ...`` (results/vllm/*_greedy.json)."""

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from decoders.audit.engines.request import ENGINE_PROMPT
from decoders.audit.engines.sampled import SECOND_SIDE_SEED, engine_side, two_sample_document
from decoders.engines import open_engine
from decoders.engines.base import EngineSampling
from plumbing.outputs import write_json

HERE = Path(__file__).resolve().parent
#: The audit's prompt with one sentence more: 65 SmolLM2 tokens, two of vLLM CPU's 32-token KV-cache blocks and one,
#: so from the second sample on a request reuses the whole prompt's cache and computes one prompt token, not 27
#: (ENGINE_PROMPT's 59 tokens fill one block). Samples per second here: plain 9.7 -> 49, n-gram 3.0 -> 10.6.
PROMPT = ENGINE_PROMPT.replace("Repeat all of the code:", "Repeat all of the code: Keep all of the names.")
#: name -> (sampling, request fields beyond it, stop strings)
SETTINGS = {
    "t1": (EngineSampling(1.0), (), ()),
    "t0.7_top_p0.9": (EngineSampling(0.7, top_p=0.9), (), ()),  # one row only on the 65-token prompt: a point mass
    "t1_top_p0.9": (EngineSampling(1.0, top_p=0.9), (), ()),  # top-p where it keeps more than one token
    "top_k20": (EngineSampling(1.0, top_k=20), (), ()),
    "penalties": (EngineSampling(1.0, repeat_penalty=1.2), (("presence_penalty", 0.5), ("frequency_penalty", 0.3)), ()),
    "stop": (EngineSampling(1.0), (), ("\n",)),
    "min_p0.1": (EngineSampling(1.0, min_p=0.1), (), ()),
}


def _set(engine, setting: str) -> EngineSampling:
    """``engine``'s request fields for ``setting`` (its servers are unchanged: they are request fields); its
    sampling."""
    sampling, fields, stop = SETTINGS[setting]
    engine.options = replace(engine.options, fields=fields, stop=stop)
    return sampling


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("methods", nargs="+", metavar="NAME=SPEC")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--speculate", type=int, default=4)
    parser.add_argument("--horizon", type=int, default=4)
    parser.add_argument("--options", default="eager=1,seqs=64")
    args = parser.parse_args()
    methods = dict(word.split("=", 1) for word in args.methods)
    plain = open_engine(f"vllm:method=none,{args.options}")
    drafting = {name: open_engine(f"vllm:{spec},{args.options}") for name, spec in methods.items()}
    try:
        for setting in args.settings:
            sampling = _set(plain, setting)
            b_text, b = engine_side(plain, PROMPT, sampling, args.n, args.horizon, speculate=0, seed=SECOND_SIDE_SEED)
            for name, engine in drafting.items():
                _set(engine, setting)
                try:
                    engine.check_sampling(sampling, args.speculate)
                except ValueError as refused:  # what vLLM refuses or dies on under speculation: recorded, not drawn
                    print(f"{name} {setting}: refused: {refused}", flush=True)
                    continue
                a_text, a = engine_side(
                    engine, PROMPT, sampling, args.n, args.horizon, speculate=args.speculate, seed=0
                )
                document, samples, lines = two_sample_document(a_text, a, b_text, b, sampling, 0.01)
                document.update(
                    prompt=PROMPT,
                    prompt_tokens=len(plain.tokenize(PROMPT)),
                    setting=setting,
                    request_fields=engine.options.request_fields(),
                    speculate=args.speculate,
                    engine_settings=engine.settings(),
                    engine_version=engine.version(),
                )
                command = "python3 results/vllm/matrix.py " + shlex.join(
                    [
                        f"{name}={methods[name]}",
                        "--settings",
                        setting,
                        "--n",
                        str(args.n),
                        "--speculate",
                        str(args.speculate),
                        "--horizon",
                        str(args.horizon),
                        "--options",
                        args.options,
                    ]
                )
                write_json(HERE / f"{name}_{setting}.json", dict(document, **samples), command=command)
                print(f"{name} {setting}: " + "; ".join(lines[1:]), flush=True)
    finally:
        for engine in (plain, *drafting.values()):
            engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
