"""vLLM's rejection sampler audited as a function against the exact law (docs/findings/vllm.md, "vLLM's rejection
sampler"): ``decoders/engines/vllm_probe.py`` runs it in vLLM's own environment on tiny batches (``CASES``), and here
each row's output counts are held against the law our reference verification gives the same row, summed exactly over
every branch of its draws (``decoders.audit.exact.Enumerator`` driving ``decoders.verification``'s accept and residual
steps), the target's law processed by our sampler (``decoders.sampling.adjusted_probs``: penalties over the prompt, the
output and the drafts before each position, temperature, top-k, top-p). A G-test per row, at ``level`` over all rows of
a case (Bonferroni); the detectable total variation is stated beside each verdict.

The cases cover what the issue asks of a verifier: sampled rows with the draft's probabilities and without (vLLM's
one-hot case: n-gram and greedy drafts), greedy rows, batches mixing greedy and sampled rows of different draft
lengths (0 included) in a fresh random order each call, drafts drawn from their law (the joint law of drafts and
output), top-k, top-p, penalties and per-request seeds. Two negative controls show the test fails a wrong
sampler: draft probabilities withheld while the drafts were drawn from them (vLLM's tracker: drafts' probabilities
passed as None), and min-p, which vLLM's rejection sampler does not apply (its start-up warning)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from decoders.audit.exact import Enumerator
from decoders.audit.statistical import detectable_tv
from decoders.engines.build import ensure_vllm, vllm_home
from decoders.sampler_state import History
from decoders.sampling import Sampling, adjusted_probs, processed_logits
from decoders.verification import accept_tokens, draft_ratio, next_token_law
from plumbing.outputs import check_writable, write_json
from plumbing.validation import as_int

__all__ = ["CASES", "PATCHES", "verification_law", "row_law", "case_verdict", "run_probe", "audit_rejection_sampler"]

PROBE = Path(__file__).with_name("vllm_probe.py")
#: Logits of a 5-token vocabulary at successive positions, no ties (ties make top-k and top-p depend on the order
#: of equal values, which no law fixes).
_L = [
    [0.3, 1.4, -0.2, 0.9, -1.1],
    [1.2, -0.4, 0.5, 0.1, -0.8],
    [-0.3, 0.2, 1.1, -1.0, 0.6],
    [0.7, -0.9, 0.05, 1.3, -0.15],
]
_Q = [[0.1, 0.45, 0.15, 0.2, 0.1], [0.3, 0.1, 0.35, 0.15, 0.1], [0.15, 0.2, 0.3, 0.05, 0.3]]


def _row(k: int, **fields) -> dict:
    """A sampled row drafting ``_Q``'s argmax tokens at k positions, with their probabilities, at T = 1."""
    return {
        "draft": [int(np.argmax(q)) for q in _Q[:k]],
        "draft_probs": _Q[:k],
        "logits": _L[: k + 1],
        "temperature": 1.0,
        **fields,
    }


#: The function-level cases: name -> (rows, what the probe does; "expect": "pass" for the reference modes, "fail"
#: for the negative controls).
CASES = {
    "sampled_with_probs": ([_row(3), _row(2, draft=[2, 0]), _row(1, draft=[4])], {}, "pass"),
    "sampled_one_hot": ([_row(3, draft_probs=None), _row(2, draft=[3, 2], draft_probs=None)], {}, "pass"),
    "temperature_0.7": ([_row(3, temperature=0.7), _row(2, temperature=0.7, draft=[3, 4])], {}, "pass"),
    "mixed_greedy_sampled_lengths": (
        [_row(3), dict(_row(2), temperature=0.0), _row(0), dict(_row(1), temperature=0.0), _row(2, temperature=0.7)],
        {},
        "pass",
    ),
    "drafts_drawn_from_q": (
        [
            {"draft_law": _Q[:3], "logits": _L, "temperature": 1.0},
            {"draft_law": _Q[:2], "logits": _L[:3], "temperature": 0.7},
        ],
        {},
        "pass",
    ),
    "top_k_2": ([_row(3, top_k=2), _row(2, top_k=3, temperature=0.7)], {}, "pass"),
    "top_k_no_drafts": ([_row(0, top_k=2), _row(0, top_k=3, temperature=0.7)], {}, "pass"),
    "top_p": ([_row(3, top_p=0.8), _row(2, top_p=0.6, temperature=0.7)], {}, "pass"),
    "top_p_one_hot": (
        [_row(3, top_p=0.8, draft_probs=None), _row(2, top_p=0.6, draft=[3, 2], draft_probs=None)],
        {},
        "pass",
    ),
    "penalties": (
        [_row(3, prompt=[1, 1, 3], output=[0, 2], repetition_penalty=1.3, presence_penalty=0.4, frequency_penalty=0.3)],
        {},
        "pass",
    ),
    "per_request_seeds": ([_row(3, seed=7), _row(2, seed=1000, temperature=0.7)], {}, "pass"),
    "control_probs_withheld": (
        [{"draft_law": _Q[:3], "logits": _L, "temperature": 1.0}],
        {"draft_probs": "withheld"},
        "fail",
    ),
    "control_min_p": ([_row(3, min_p=0.3)], {}, "fail"),
}
#: Patches the probe can apply to vLLM before a run (decoders/engines/vllm_probe.py, ``PATCHES`` there).
PATCHES = ("expand",)


def _processed(logits: list, row: dict, position: int, drafts: list) -> torch.Tensor:
    """The target's law at ``position`` of ``row`` under its sampling parameters, penalties counting the prompt,
    the output and the drafts before the position (vLLM's rule, docs/theory-sampling.md §14). # [V]"""

    temperature = row.get("temperature", 1.0)
    sampling = Sampling(
        temperature=temperature or 1.0,
        top_k=row.get("top_k"),
        top_p=row.get("top_p"),
        min_p=row.get("min_p"),
        repetition_penalty=row.get("repetition_penalty", 1.0),
        presence_penalty=row.get("presence_penalty", 0.0),
        frequency_penalty=row.get("frequency_penalty", 0.0),
    )
    output = list(row.get("output", [])) + list(drafts[:position])
    history = (
        History.of([list(row.get("prompt", [])) + output], len(logits), "cpu", [len(output)])
        if sampling.uses_history
        else None
    )
    scores = torch.tensor([logits], dtype=torch.float64)
    if temperature == 0:
        best = processed_logits(scores, sampling, history)[0]
        return torch.nn.functional.one_hot(best.argmax(), len(logits)).to(torch.float64)
    return adjusted_probs(scores, sampling, history=history)[0]


def verification_law(p: torch.Tensor, q: torch.Tensor, drafted: list) -> dict:
    """The exact law of one verification (our reference: accept x_i with min(1, p_i(x_i) / q_i(x_i)), the first
    rejection's token from norm((p - q)+), the bonus from p after all k were accepted) of the drafts ``drafted``
    under p ``[k + 1, V]`` and q ``[k, V]``: output tuple -> probability, every branch of the draws enumerated."""

    k = len(drafted)
    if k == 0:
        return {(token,): float(mass) for token, mass in enumerate(p[0].tolist()) if mass > 0}
    law: dict = {}
    scripts: list = [()]
    while scripts:
        randomness = Enumerator(scripts)
        rows = len(scripts)
        tokens = torch.tensor([drafted] * rows)
        proposed = torch.ones(rows, k, dtype=torch.bool)
        ratio = draft_ratio(p[None].expand(rows, -1, -1), q[None].expand(rows, -1, -1), tokens, proposed)
        accepted = accept_tokens(ratio, proposed, 1.0, k, randomness)
        weights = next_token_law(p[None].expand(rows, -1, -1), q[None].expand(rows, -1, -1), accepted, proposed)
        last = randomness.categorical(weights)
        for row, (a, token) in enumerate(zip(accepted.tolist(), last.tolist())):
            key = tuple(drafted[:a]) + (token,)
            law[key] = law.get(key, 0.0) + float(randomness.probability[row])
        scripts = [script for _, script in randomness.branches]
    return law


def _greedy_law(row: dict, drafted: list) -> dict:
    """A greedy row's one output: the drafts while each is the target's argmax, then the argmax."""
    emitted = []
    for position in range(len(drafted) + 1):
        best = int(_processed(row["logits"][position], row, position, drafted).argmax())
        emitted.append(best)
        if position == len(drafted) or best != drafted[position]:
            break
    return {tuple(emitted): 1.0}


def row_law(row: dict) -> dict:
    """The exact law of a row's output (with ``draft_law``: of ``drafts|output``, as the probe counts it)."""
    if row.get("draft_law") is not None:
        law = {}
        import itertools

        q = row["draft_law"]
        for drafts in itertools.product(range(len(q[0])), repeat=len(q)):
            weight = math.prod(q[i][t] for i, t in enumerate(drafts))
            if weight == 0:
                continue
            for output, mass in row_law(dict(row, draft_law=None, draft=list(drafts), draft_probs=q)).items():
                law[",".join(map(str, drafts)) + "|" + output] = weight * mass
        return law
    drafted = list(row.get("draft", []))
    if row.get("temperature", 1.0) == 0:
        return {",".join(map(str, key)): mass for key, mass in _greedy_law(row, drafted).items()}
    p = torch.stack([_processed(row["logits"][i], row, i, drafted) for i in range(len(drafted) + 1)])
    vocab = p.shape[1]
    q = (
        torch.tensor(row["draft_probs"], dtype=torch.float64)
        if row.get("draft_probs") is not None
        else torch.nn.functional.one_hot(torch.tensor(drafted, dtype=torch.int64), vocab).to(torch.float64)
    )
    return {
        ",".join(map(str, key)): mass
        for key, mass in verification_law(p, q.reshape(len(drafted), vocab), drafted).items()
    }


@dataclass(frozen=True)
class RowVerdict:
    """One row's G-test of its counts against its exact law: statistic, degrees of freedom, p-value, the total
    variation of the empirical law from the exact one, and the outputs the law forbids that came out."""

    row: int
    draws: int
    statistic: float | None
    dof: int
    p_value: float
    tv: float
    impossible: int


def _g_test(counts: dict, law: dict) -> RowVerdict:
    """G-test of ``counts`` against ``law``, cells of expected count below 5 pooled into one."""
    n = sum(counts.values())
    impossible = sum(count for key, count in counts.items() if law.get(key, 0.0) <= 0)
    keys = sorted(set(law) | set(counts))
    expected = np.array([law.get(key, 0.0) * n for key in keys])
    observed = np.array([counts.get(key, 0) for key in keys], dtype=np.float64)
    small = expected < 5
    cells_e = list(expected[~small]) + ([expected[small].sum()] if small.any() else [])
    cells_o = list(observed[~small]) + ([observed[small].sum()] if small.any() else [])
    cells_e, cells_o = np.array(cells_e), np.array(cells_o)
    tv = 0.5 * float(np.abs(observed / n - expected / n).sum())
    if impossible:
        return RowVerdict(-1, n, None, len(cells_e) - 1, 0.0, tv, impossible)  # no statistic: the law is broken
    if len(cells_e) < 2:  # one possible outcome, and only it came out
        return RowVerdict(-1, n, 0.0, 0, 1.0, tv, 0)
    seen = cells_o > 0
    g = 2.0 * float(np.sum(cells_o[seen] * np.log(cells_o[seen] / cells_e[seen])))
    dof = len(cells_e) - 1
    return RowVerdict(-1, n, g, dof, float(stats.chi2.sf(g, dof)), tv, 0)


def case_verdict(name: str, rows: list, counts: list, level: float) -> dict:
    """A case's verdict: each row's ``RowVerdict``, the case's p-value (Bonferroni over its rows), PASS at
    ``level``, and the detectable total variation at its draws (``decoders.audit.statistical.detectable_tv``)."""

    verdicts = []
    for index, (row, tally) in enumerate(zip(rows, counts)):
        found = _g_test(tally, row_law(row))
        verdicts.append(dict(found.__dict__, row=index))
    p_value = min(1.0, len(verdicts) * min(verdict["p_value"] for verdict in verdicts))
    draws = min(verdict["draws"] for verdict in verdicts)
    return {
        "case": name,
        "rows": verdicts,
        "p_value": p_value,
        "passed": p_value >= level,
        "level": level,
        "draws_per_row": draws,
        "detectable_tv": detectable_tv(draws, len(verdicts), level),
    }


def run_probe(python: Path, cases: dict, *, draws: int, repeats: int, seed: int, patch: tuple = ()) -> dict:
    """The probe's counts of ``cases`` (name -> (rows, options, expected)) run by vLLM's ``python``."""
    spec = {
        "seed": seed,
        "patch": list(patch),
        "cases": [
            {"name": name, "vocab": len(_L[0]), "draws": draws, "repeats": repeats, "rows": rows, **options}
            for name, (rows, options, _) in cases.items()
        ],
    }
    answer = subprocess.run([str(python), str(PROBE)], input=json.dumps(spec), capture_output=True, text=True)
    if answer.returncode != 0:
        tail = answer.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"vLLM's rejection sampler probe failed: {tail[0]}")
    return json.loads(answer.stdout)


def audit_rejection_sampler(
    python: Path,
    *,
    draws: int = 1_000_000,
    repeats: int = 2000,
    seed: int = 0,
    level: float = 0.01,
    patch: tuple = (),
    names=None,
) -> dict:
    """Every case (or ``names``) run through vLLM's rejection sampler and judged against its exact law."""
    unknown = [name for name in names or () if name not in CASES]
    if unknown:
        raise ValueError(f"unknown rejection-sampler case {unknown[0]!r}; they are {', '.join(CASES)}")
    chosen = {name: CASES[name] for name in (names or CASES)}
    found = run_probe(python, chosen, draws=draws, repeats=repeats, seed=seed, patch=patch)
    verdicts = []
    for result in found["results"]:
        rows, _, expected = chosen[result["name"]]
        verdict = (
            {"case": result["name"], "passed": False, "p_value": 0.0, "rows": [], "level": level}
            if result.get("error")
            else case_verdict(result["name"], rows, result["counts"], level)
        )
        verdicts.append(dict(verdict, expected=expected, seconds=result["seconds"], error=result.get("error")))
    return {
        "vllm": found["vllm"],
        "torch": found["torch"],
        "patch": list(patch),
        "draws": draws,
        "seed": seed,
        "level": level,
        "cases": verdicts,
    }


def lines(found: dict) -> list:
    """The printed verdict table of ``audit_rejection_sampler``'s document."""
    out = [
        f"vLLM {found['vllm']} rejection sampler as a function (patch: {', '.join(found['patch']) or 'none'}), "
        f"{found['draws']:,} draws a case, level {found['level']}"
    ]
    for case in found["cases"]:
        verdict = "PASS" if case["passed"] else "FAIL"
        worst = max((row["tv"] for row in case["rows"]), default=float("nan"))
        detail = case.get("error") or (
            f"p = {case['p_value']:.3g}, largest TV {worst:.4f}, detectable TV {case['detectable_tv']:.4f}"
        )
        out.append(f"  {case['case']:30s} {verdict} ({detail}); expected {case['expected'].upper()}")
    return out


def main(argv=None) -> int:
    """``python3 -m decoders.engines.vllm_sampler [--draws N] [--patch expand] [--out FILE.json] [CASE ...]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 -m decoders.engines.vllm_sampler", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--draws", type=int, default=1_000_000, help="draws a case (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=2000, help="copies of a case's rows in one call (default 2000)")
    parser.add_argument("--patch", action="append", choices=PATCHES, default=[], help="patch vLLM first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--level", type=float, default=0.01)
    parser.add_argument("--out", metavar="FILE.json")
    args = parser.parse_args(argv)
    try:
        if args.out:
            check_writable(args.out)

        as_int("draws", args.draws, low=100, high=100_000_000)
        as_int("repeats", args.repeats, low=1, high=100_000)
        found = audit_rejection_sampler(
            ensure_vllm(vllm_home()) / "bin" / "python",
            draws=args.draws,
            repeats=args.repeats,
            seed=args.seed,
            level=args.level,
            patch=tuple(args.patch),
            names=args.cases or None,
        )
    except ValueError as error:
        print(f"python3 -m decoders.engines.vllm_sampler: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines(found)))
    if args.out:
        import shlex

        write_json(
            args.out, found, command="python3 -m decoders.engines.vllm_sampler " + shlex.join(argv or sys.argv[1:])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
