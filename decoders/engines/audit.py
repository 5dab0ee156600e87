"""Auditing an engine's speculative sampler (docs/engines.md): at temperature 0, its greedy tokens with
speculation against its own plain greedy decoding, gamma by gamma; at temperature > 0, its samples with
speculation against a second sample (the same engine without speculation, a second server, or a file) by
the two-sample test, with disjoint seeds (llama.cpp's samples under one seed are coupled across the two
paths, so two files drawn with the same seeds are not independent samples).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from decoders.audit.two_sample import TwoSampleReport, two_sample_test
from decoders.engines.audit_model import against_model, check_model_law, model_lines, numeric_tv
from decoders.engines.base import END, Engine, EngineRun, EngineSampling, capability
from decoders.engines.registry import is_samples_file, speculation_fixed
from spectheory.validation import as_int

__all__ = [
    "GreedyCheck",
    "greedy_checks",
    "probabilities_check",
    "LOGPROB_TOLERANCE",
    "diagnose_difference",
    "batch_shape_difference",
    "as_categories",
    "compare_runs",
    "greedy_audit",
    "greedy_lines",
    "two_sample_document",
    "samples_side",
    "engine_side",
    "EngineAuditRequest",
    "run_engine_audit",
    "SECOND_SIDE_SEED",
    "ENGINE_PROMPT",
]

#: Seeds of the second side start here, so that the two sides never share one (module docstring).
SECOND_SIDE_SEED = 1 << 30
#: The default prompt: a ChatML rewrite request (SmolLM2's template), where prompt lookup has text to copy.
ENGINE_PROMPT = (
    "<|im_start|>user\nAdd type hints to this Python code. Repeat all of the code:\n```python\n"
    "def scale(values, factor):\n    total = 0\n    for value in values:\n"
    "        total += value * factor\n    return total\n```<|im_end|>\n<|im_start|>assistant\n```python\n"
)


@dataclass(frozen=True)
class GreedyCheck:
    """At one gamma: the engine's greedy tokens with speculation equal its plain ones; if not, the first
    difference and, where the engine gives logits, its diagnosis (``diagnose_difference``)."""

    gamma: int
    tokens: int
    equal: bool
    first_difference: int | None
    counters: dict
    diagnosis: dict | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def diagnose_difference(logits_after, prompt_ids: list, plain: tuple, speculative: tuple, position: int) -> dict:
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
    return {
        "position": position,
        "plain_token": ours,
        "speculative_token": theirs,
        "margin_one_token": margins[0],
        "margin_two_tokens": margins[1],
        "verdict": "batch-shape numerics (a near tie whose order flips between a one-token and a two-token call)"
        if numerics
        else "unexplained by numerics: a bug",
    }


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
        checks.append(GreedyCheck(gamma, horizon, not differ, differ[0] if differ else None, run.counters, diagnosis))
        if progress:
            progress(1)
    return plain, checks


#: Reported log-probabilities of one token on two paths may differ by this much (nats) from batch-shape numerics.
LOGPROB_TOLERANCE = 0.01


def probabilities_check(token_logprobs, prompt_ids: list, horizon: int, gammas, top: int = 2) -> dict:
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
        checks.append(
            {
                "gamma": gamma,
                "compared": agree,
                "wrong": len(wrong),
                "wrong_positions": wrong,
                "first_wrong": None
                if not wrong
                else {
                    "position": wrong[0],
                    "token": plain[wrong[0]][0],
                    "plain_logprob": plain[wrong[0]][1],
                    "reported_logprob": spec[wrong[0]][1],
                    "plain_top": [list(t) for t in plain[wrong[0]][2]],
                    "reported_top": [list(t) for t in spec[wrong[0]][2]],
                },
            }
        )
    return {
        "top": top,
        "tolerance": LOGPROB_TOLERANCE,
        "checks": checks,
        "passed": not any(check["wrong"] for check in checks),
    }


def batch_shape_difference(engine, prompt_ids: list, tokens: list, chunk: int = 5) -> dict:
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
    return {
        "chunk": chunk,
        "positions": len(sequence),
        "tv_at_t1": tv.tolist(),
        "tv_median": float(np.median(tv)),
        "tv_max": float(tv.max()),
        "max_logit_difference": np.abs(one - batched).max(axis=1).tolist(),
    }


def as_categories(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Rows of two samples (ids or text pieces, ``END``-padded) as int64 category arrays ``[n, T]``, one code
    per distinct token over both: ids first in their order, then text pieces in theirs, so that a code is a
    function of the pooled set of tokens, not of which sample showed a token first (docs/engines.md §3)."""
    distinct = {token for rows in (a, b) for row in rows for token in row}
    codes = {
        token: code for code, token in enumerate(sorted(distinct, key=lambda token: (isinstance(token, str), token)))
    }
    encode = np.vectorize(codes.__getitem__, otypes=[np.int64])
    return encode(np.array(a, dtype=object)), encode(np.array(b, dtype=object))


def compare_runs(a: EngineRun, b: EngineRun, level: float) -> TwoSampleReport:
    """The two-sample test of two engine runs' rows."""
    left, right = as_categories(a.rows, b.rows)
    return two_sample_test(left, right, level)


def greedy_audit(engine: Engine, prompt: str, horizon: int, gammas, progress=None) -> dict:
    """The greedy audit's document: plain greedy tokens, a check per gamma, and for llama.cpp in-process its
    batch-shape numerics (``batch_shape_difference``); it passes when every gamma is equal to plain decoding
    or differs by batch-shape numerics alone."""
    plain, checks = greedy_checks(engine, prompt, horizon, gammas, progress)
    explained = sum(
        not check.equal and bool(check.diagnosis) and check.diagnosis["verdict"].startswith("batch-shape")
        for check in checks
    )
    document = {
        "engine": engine.name,
        "horizon": horizon,
        "prompt": prompt,
        "prompt_ids": None,
        "plain": list(plain),
        "checks": [check.as_dict() for check in checks],
        "explained_by_numerics": explained,
        "passed": explained == sum(not check.equal for check in checks),
    }
    if capability(engine, "tokenize"):
        document["prompt_ids"] = list(engine.tokenize(prompt))
    if document["prompt_ids"] is not None and capability(engine, "all_logits"):
        document["batch_shape"] = batch_shape_difference(
            engine, document["prompt_ids"], [token for token in plain if token != END]
        )
    if document["prompt_ids"] is not None and capability(engine, "token_logprobs"):
        document["probabilities"] = probabilities_check(engine.token_logprobs, document["prompt_ids"], horizon, gammas)
        document["passed"] = document["passed"] and document["probabilities"]["passed"]
    return document


def greedy_lines(document: dict) -> list:
    """The greedy audit's printed lines."""
    lines = [
        f"audit: {document['engine']}, greedy with speculation against its plain greedy decoding, "
        f"{document['horizon']} tokens"
    ]
    for check in document["checks"]:
        counts, why = check["counters"], check["diagnosis"]
        line = f"gamma {check['gamma']}: " + (
            "equal" if check["equal"] else f"differs at token {check['first_difference']}"
        )
        line += f" (accepted {counts['num_accepted_tokens']} of {counts['num_draft_tokens']} drafted)" if counts else ""
        line += (
            ""
            if why is None
            else (
                f"; margin of the plain token {why['margin_one_token']:+.3f} in a one-token "
                f"call, {why['margin_two_tokens']:+.3f} in a two-token call: {why['verdict']}"
            )
        )
        lines.append(line)
    shape = document.get("batch_shape")
    if shape:
        lines.append(
            f"the same positions evaluated one token per call and {shape['chunk']} per call: logits differ by "
            f"up to {max(shape['max_logit_difference']):.3f}; the laws at T = 1 by a total variation of "
            f"median {shape['tv_median']:.4f}, max {shape['tv_max']:.4f} per position"
        )
    explained = document["explained_by_numerics"]
    probabilities = document.get("probabilities")
    if probabilities:
        for check in probabilities["checks"]:
            first = check["first_wrong"]
            lines.append(
                f"gamma {check['gamma']}: reported probabilities of {check['compared']} tokens: "
                + (
                    "equal to plain decoding's"
                    if not first
                    else f"{check['wrong']} differ; first at token {first['position']}: log-probability "
                    f"{first['reported_logprob']:.4f} reported, {first['plain_logprob']:.4f} without "
                    f"speculation, {len(first['reported_top'])} of {probabilities['top']} top entries"
                )
            )
        lines.append("reported probabilities: " + ("PASS" if probabilities["passed"] else "FAIL"))
    tokens_passed = explained == sum(not check["equal"] for check in document["checks"])
    lines.append(
        "greedy: "
        + ("PASS" if tokens_passed else "FAIL")
        + (f" ({explained} of {len(document['checks'])} gammas differ by batch-shape numerics)" if explained else "")
    )
    return lines


def two_sample_document(
    a_text: str, a: EngineRun, b_text: str, b: EngineRun, sampling: EngineSampling, level: float
) -> tuple[dict, dict, list]:
    """(verdict document, both samples' rows, printed lines) of the two-sample audit of two runs."""
    report = compare_runs(a, b, level)
    rates = [len(run.rows) / run.seconds if run.seconds > 0 else 0.0 for run in (a, b)]
    ratio = rates[0] / rates[1] if all(rates) else None  # a side drawn from a file has no rate
    document = dict(
        report.as_dict(),
        a=a_text,
        b=b_text,
        sampling=sampling.describe(),
        lost=[a.lost, b.lost],
        seconds=[a.seconds, b.seconds],
        counters=[a.counters, b.counters],
        samples_per_second=rates,
        throughput_ratio=ratio,
    )
    lines = [f"audit: {a_text} against {b_text}; {sampling.describe()}, horizon {report.horizon}", report.summary()]
    if ratio is not None:
        lines.append(f"samples a second: {rates[0]:.1f} against {rates[1]:.1f} (ratio {ratio:.2f})")
    return document, {"rows_a": [list(row) for row in a.rows], "rows_b": [list(row) for row in b.rows]}, lines


def samples_side(path: str, prompt: str | None = None, tokenize=None) -> tuple[str, EngineRun]:
    """(description, run) of a samples file (JSON Lines, ``decoders.audit.samples.read_rows``); with ``prompt``,
    the file must continue that prompt (its text, or its ids by ``tokenize`` where the file holds ids)."""
    from decoders.audit.samples import check_continues, read_rows

    file_prompt, rows = read_rows(path)
    check_continues(path, file_prompt, prompt, tokenize)
    return f"samples file {path} ({len(rows)} rows)", EngineRun(tuple(rows), 0.0)


def engine_side(
    engine: Engine,
    prompt: str,
    sampling: EngineSampling,
    n: int,
    horizon: int,
    *,
    speculate: int,
    seed: int,
    fixed: bool = False,
) -> tuple[str, EngineRun]:
    """(description, run) of n samples drawn from ``engine`` (``fixed``: by its own speculation settings)."""
    from decoders.progress import progress_bar

    with progress_bar(None, total=n, desc=f"{engine.name} speculate {speculate}", unit="sample") as bar:
        run = engine.generate(prompt, n, horizon, sampling, speculate=speculate, seed=seed, progress=bar.update)
    lost = f", {run.lost} of {n} samples lost" if run.lost else ""
    setting = "its own speculation settings" if fixed else f"speculate {speculate}"
    return f"{engine.name}, {setting} ({len(run.rows)} rows{lost})", run


@dataclass(frozen=True)
class EngineAuditRequest:
    """What `spectheory audit --engine` audits (docs/engines.md §3), checked before any work: ``engine`` (or
    ``samples``, a file) with speculation ``speculate`` against ``against`` (plain, model, a URL or a file);
    at temperature 0 the greedy audit over ``gammas``. ``speculate`` None: 4 draft tokens in-process; a server
    speculates by its own settings, so a URL takes no ``speculate`` and runs in-process audits only above
    temperature 0."""

    engine: str | None
    samples: str | None = None
    against: str | None = None
    sampling: EngineSampling = field(default_factory=EngineSampling)
    speculate: int | None = None
    gammas: tuple = tuple(range(1, 9))
    n: int = 5000
    horizon: int = 4
    level: float = 0.01
    seed: int = 0
    prompt: str = ENGINE_PROMPT
    gguf: str | None = None
    concurrency: int = 4

    def __post_init__(self) -> None:
        if self.engine is None and self.samples is None:
            raise ValueError(
                "--against compares an engine (--engine) or a samples file (--samples) with a second sample"
            )
        if self.samples is not None and self.against is None:
            raise ValueError("--samples with --engine flags needs --against B.jsonl (or drop --engine flags)")
        if self.speculate is not None:
            as_int("speculate", self.speculate, low=1, high=64)
        if self._fixed_speculation and self.speculate is not None:
            raise ValueError(
                f"--speculate {self.speculate}: an OpenAI-compatible server speculates by its own "
                "settings; compare a drafting server with a plain one (--engine URL --against URL2)"
            )
        if self._fixed_speculation and self.greedy:
            raise ValueError(
                "--temperature 0 audits greedy equality by setting the engine's speculation per "
                "--gammas, which a server fixes at its start: use --engine llama-cpp, or a temperature "
                "above 0 with --against URL2"
            )
        as_int("concurrency", self.concurrency, low=1, high=256)
        for gamma in self.gammas:
            as_int("gammas", gamma, low=1, high=64)
        as_int("horizon", self.horizon, low=1, high=1024)
        as_int("n", self.n, low=2, high=1_000_000)
        if self.against == "model":
            check_model_law(self.sampling)

    @property
    def _fixed_speculation(self) -> bool:  # a server that speculates by its own settings (registry.SERVER_START)
        return self.engine is not None and speculation_fixed(self.engine)

    @property
    def draft_tokens(self) -> int:
        """The engine side's speculation: ``speculate``, 4 by default in-process, 0 (its own settings) for a URL."""
        return 0 if self._fixed_speculation else (self.speculate or 4)

    @property
    def greedy(self) -> bool:
        return self.sampling.temperature == 0 and self.samples is None

    def open(self, spec: str) -> Engine:
        from decoders.engines import open_engine

        return open_engine(spec, gguf=self.gguf, concurrency=self.concurrency)

    def side(self, spec: str, *, speculate: int, seed: int, engine=None) -> tuple[str, EngineRun]:
        """(description, run) of one side: a samples file, or an engine (opened here unless given)."""
        if is_samples_file(spec):
            return samples_side(spec, None if self.engine is None else self.prompt, capability(engine, "tokenize"))
        return engine_side(
            engine or self.open(spec),
            self.prompt,
            self.sampling,
            self.n,
            self.horizon,
            speculate=speculate,
            seed=seed,
            fixed=speculation_fixed(spec),
        )


def run_engine_audit(request: EngineAuditRequest, progress=None) -> tuple[dict, dict, list]:
    """(verdict document with "passed", the samples drawn, printed lines) of ``request``."""
    if request.greedy:
        document = greedy_audit(request.open(request.engine), request.prompt, request.horizon, request.gammas, progress)
        return document, {}, greedy_lines(document)
    against = request.against or "plain"
    file_b = is_samples_file(against)  # read, its prompt checked, before a is drawn
    other = None if file_b or against in ("plain", "model") else request.open(against)  # asked first: a dead URL
    engine = None if request.engine is None else request.open(request.engine)  # fails before a server starts
    b_text, b = request.side(against, speculate=0, seed=0, engine=engine) if file_b else (None, None)
    a_text, a = request.side(
        request.samples or request.engine, speculate=request.draft_tokens, seed=request.seed, engine=engine
    )
    if against == "model":
        found = against_model(engine, request.prompt, a, request.sampling, level=request.level, seed=request.seed)
        return (
            dict(found, engine=a_text, sampling=request.sampling.describe()),
            {"rows": list(a.rows)},
            model_lines(found, a_text, engine.model_path.name, request.sampling),
        )
    if not file_b:
        b_text, b = request.side(
            request.engine if against == "plain" else against,
            speculate=0,
            seed=request.seed + SECOND_SIDE_SEED,
            engine=engine if against == "plain" else other,
        )
    document, samples, lines = two_sample_document(a_text, a, b_text, b, request.sampling, request.level)
    version, known = capability(engine, "version"), capability(engine, "known_deviations")
    return (
        (dict(document, engine_version=version()) if version else document),
        samples,
        lines + (known() if known else []),
    )
