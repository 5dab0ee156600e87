"""An engine's greedy decoding with speculation against its own plain greedy decoding, gamma by gamma (docs/engines.md
§3): the first difference of each, diagnosed from the engine's logits where it gives them (near tie, batch-shape
numerics, or a bug), and the probabilities each path reports."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from decoders.audit.engines.model import numeric_tv
from decoders.engine_results import (
    BatchShape,
    Diagnosis,
    EngineGreedyAudit,
    GreedyCheck,
    ProbabilitiesCheck,
    ProbabilityCheck,
    WrongProbability,
)
from decoders.engines.base import END, Engine, EngineSampling, capability

__all__ = [
    "diagnose_difference",
    "greedy_checks",
    "LOGPROB_TOLERANCE",
    "probabilities_check",
    "batch_shape_difference",
    "greedy_audit",
    "greedy_lines",
]


def diagnose_difference(logits_after, prompt_ids: list, plain: tuple, speculative: tuple, position: int) -> Diagnosis:
    """Why greedy decoding with speculation left plain greedy decoding at ``position``: the logit margin of the
    plain token over the speculative one after the same history, fed one token per call, once with the last call
    of one token (the plain path) and once of two, that token and the next (a gamma = 1 verify call), by
    ``logits_after(chunks, row)``. Opposite signs mean each path took its own argmax of a near tie that the
    call's batch shape decides: numerics, not a sampler bug. The same sign means the speculative path emitted
    a token its own evaluation does not rank first: a bug."""
    history = [[token] for token in plain[:position]]
    last = history.pop() if history else [prompt_ids[-1]]
    head = [prompt_ids] if history or position else [prompt_ids[:-1]]
    ours, theirs = plain[position], speculative[position]
    one = logits_after(head + history + [last])
    two = logits_after(head + history + [last + [theirs]], row=-2)
    margins = (float(one[ours] - one[theirs]), float(two[ours] - two[theirs]))
    numerics = margins[0] >= 0 >= margins[1]
    return Diagnosis(
        position=position,
        plain_token=ours,
        speculative_token=theirs,
        margin_one_token=margins[0],
        margin_two_tokens=margins[1],
        verdict="batch-shape numerics (a near tie whose order flips between a one-token and a two-token call)"
        if numerics
        else "unexplained by numerics: a bug",
    )


def greedy_checks(engine: Engine, prompt: str, horizon: int, gammas, progress=None) -> tuple[tuple, list]:
    """(the plain greedy row, a ``GreedyCheck`` per gamma): one continuation of ``horizon`` tokens each, every
    difference diagnosed where the engine gives its logits (in-process llama.cpp)."""
    greedy = EngineSampling(temperature=0.0)
    plain = engine.generate(prompt, 1, horizon, greedy, speculate=0).rows[0]
    checks = []
    for gamma in gammas:
        run = engine.generate(prompt, 1, horizon, greedy, speculate=gamma)
        row = run.rows[0]
        differ = [i for i, (a, b) in enumerate(zip(row, plain)) if a != b]
        logits_after, tokenize = capability(engine, "logits_after"), capability(engine, "tokenize")
        diagnosis = (
            diagnose_difference(logits_after, tokenize(prompt), plain, row, differ[0])
            if differ and logits_after and tokenize
            else None
        )
        checks.append(
            GreedyCheck(
                gamma=gamma,
                tokens=horizon,
                equal=not differ,
                first_difference=differ[0] if differ else None,
                counters=run.counters,
                diagnosis=diagnosis,
            )
        )
        if progress:
            progress(1)
    return plain, checks


#: Reported log-probabilities of one token on two paths may differ by this much (nats) from batch-shape numerics.
LOGPROB_TOLERANCE = 0.01


def probabilities_check(token_logprobs, prompt_ids: list, horizon: int, gammas, top: int = 2) -> ProbabilitiesCheck:
    """The engine's reported probabilities of its greedy tokens (``token_logprobs``, an engine capability) with
    speculation at each gamma against without: at every position where both paths emitted the same token, the
    emitted token's log-probability within ``LOGPROB_TOLERANCE`` and the same top ids. A path that reports no
    probabilities for some tokens (an empty top list) fails there."""
    greedy = EngineSampling(temperature=0.0)
    plain = token_logprobs(prompt_ids, horizon, greedy, speculate=0, top=top)
    checks = []
    for gamma in gammas:
        spec = token_logprobs(prompt_ids, horizon, greedy, speculate=gamma, top=top)
        agree = next((i for i, (a, b) in enumerate(zip(plain, spec)) if a[0] != b[0]), min(len(plain), len(spec)))
        wrong = [
            i
            for i in range(agree)
            if abs(plain[i][1] - spec[i][1]) > LOGPROB_TOLERANCE
            or [t for t, _ in plain[i][2]] != [t for t, _ in spec[i][2]]
        ]
        first = None
        if wrong:
            first = WrongProbability(
                position=wrong[0],
                token=plain[wrong[0]][0],
                plain_logprob=plain[wrong[0]][1],
                reported_logprob=spec[wrong[0]][1],
                plain_top=[list(t) for t in plain[wrong[0]][2]],
                reported_top=[list(t) for t in spec[wrong[0]][2]],
            )
        checks.append(
            ProbabilityCheck(gamma=gamma, compared=agree, wrong=len(wrong), wrong_positions=wrong, first_wrong=first)
        )
    return ProbabilitiesCheck(
        top=top, tolerance=LOGPROB_TOLERANCE, checks=tuple(checks), passed=not any(check.wrong for check in checks)
    )


def batch_shape_difference(engine, prompt_ids: list, tokens: list, chunk: int = 5) -> BatchShape:
    """An engine's logits (its ``all_logits``) at the positions of ``tokens`` after ``prompt_ids``, evaluated one
    token per call (the plain path) and ``chunk`` tokens per call (verify calls): the largest logit difference per
    position and the total variation of the two laws at T = 1, which bounds how exactly speculation can keep the
    plain law."""
    sequence = [prompt_ids[-1]] + list(tokens[:-1])  # position i of the result predicts tokens[i]
    head = [list(prompt_ids[:-1])]

    def logits(size):
        chunks = head + [sequence[i : i + size] for i in range(0, len(sequence), size)]
        return engine.all_logits(chunks)[len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(sequence)]

    one, batched = logits(1), logits(chunk)
    tv = numeric_tv(one, batched)
    return BatchShape(
        chunk=chunk,
        positions=len(sequence),
        tv_at_t1=tv.tolist(),
        tv_median=float(np.median(tv)),
        tv_max=float(tv.max()),
        max_logit_difference=np.abs(one - batched).max(axis=1).tolist(),
    )


def greedy_audit(engine: Engine, prompt: str, horizon: int, gammas, progress=None) -> EngineGreedyAudit:
    """The greedy audit's document: plain greedy tokens, a check per gamma, and for llama.cpp in-process its
    batch-shape numerics (``batch_shape_difference``); it passes when every gamma is equal to plain decoding
    or differs by batch-shape numerics alone."""
    ids = list(engine.tokenize(prompt)) if capability(engine, "tokenize") else None
    token_logprobs = capability(engine, "token_logprobs") if ids is not None else None
    checks, reported = [], []
    for gamma in gammas:  # a gamma's tokens and probabilities together: one speculating server at a time
        plain, found = greedy_checks(engine, prompt, horizon, [gamma], progress)
        checks += found
        if token_logprobs:
            reported.append(probabilities_check(token_logprobs, ids, horizon, [gamma]))
    explained = sum(
        not check.equal and check.diagnosis is not None and check.diagnosis.verdict.startswith("batch-shape")
        for check in checks
    )
    shape = None
    if ids is not None and capability(engine, "all_logits"):
        shape = batch_shape_difference(engine, ids, [token for token in plain if token != END])
    probabilities = (
        replace(
            reported[0],
            checks=tuple(check for part in reported for check in part.checks),
            passed=all(part.passed for part in reported),
        )
        if reported
        else None
    )
    tokens_passed = explained == sum(not check.equal for check in checks)
    return EngineGreedyAudit(
        engine=engine.name,
        horizon=horizon,
        prompt=prompt,
        prompt_ids=ids,
        plain=list(plain),
        checks=tuple(checks),
        explained_by_numerics=explained,
        passed=tokens_passed and (probabilities is None or probabilities.passed),
        batch_shape=shape,
        probabilities=probabilities,
    )


def greedy_lines(document: EngineGreedyAudit) -> list:
    """The greedy audit's printed lines."""
    lines = [
        f"audit: {document.engine}, greedy with speculation against its plain greedy decoding, "
        f"{document.horizon} tokens"
    ]
    for check in document.checks:
        counts, why = check.counters, check.diagnosis
        line = f"gamma {check.gamma}: " + ("equal" if check.equal else f"differs at token {check.first_difference}")
        line += f" (accepted {counts['num_accepted_tokens']} of {counts['num_draft_tokens']} drafted)" if counts else ""
        line += (
            ""
            if why is None
            else (
                f"; margin of the plain token {why.margin_one_token:+.3f} in a one-token "
                f"call, {why.margin_two_tokens:+.3f} in a two-token call: {why.verdict}"
            )
        )
        lines.append(line)
    shape = document.batch_shape
    if shape:
        lines.append(
            f"the same positions evaluated one token per call and {shape.chunk} per call: logits differ by "
            f"up to {max(shape.max_logit_difference):.3f}; the laws at T = 1 by a total variation of "
            f"median {shape.tv_median:.4f}, max {shape.tv_max:.4f} per position"
        )
    explained = document.explained_by_numerics
    probabilities = document.probabilities
    if probabilities:
        for check in probabilities.checks:
            first = check.first_wrong
            lines.append(
                f"gamma {check.gamma}: reported probabilities of {check.compared} tokens: "
                + (
                    "equal to plain decoding's"
                    if not first
                    else f"{check.wrong} differ; first at token {first.position}: log-probability "
                    f"{first.reported_logprob:.4f} reported, {first.plain_logprob:.4f} without "
                    f"speculation, {len(first.reported_top)} of {probabilities.top} top entries"
                )
            )
        lines.append("reported probabilities: " + ("PASS" if probabilities.passed else "FAIL"))
    tokens_passed = explained == sum(not check.equal for check in document.checks)
    lines.append(
        "greedy: "
        + ("PASS" if tokens_passed else "FAIL")
        + (f" ({explained} of {len(document.checks)} gammas differ by batch-shape numerics)" if explained else "")
    )
    return lines
