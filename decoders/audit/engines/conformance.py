"""Engine conformance (docs/conformance.md): one battery that tells where speculation changes what an engine returns.
A battery is a list of rows (``ConformanceRow``: what is sent, what is compared, by which test), each runnable alone
(``run_row``). A row whose request the engine refuses under speculation (its ``check_sampling``) is REFUSED, one that
needs what the engine lacks (a capability) NOT OFFERED: listed as such, never as a pass. The kinds:

- ``greedy``: greedy tokens with speculation at each draft length against plain greedy decoding, on several prompts,
  each difference diagnosed where the engine gives its logits (``decoders.audit.engines.greedy``); two servers (a
  speculating one and a plain one) compare their greedy tokens;
- ``law``: the sampled law at one setting, speculating samples against plain ones by the two-sample test with
  disjoint seeds (``decoders.audit.engines.sampled``);
- ``logprobs``: the log-probabilities the engine reports for its greedy tokens with speculation against without
  (``probabilities_check``: within ``LOGPROB_TOLERANCE`` and the same top ids);
- ``seeds``: the same seeded requests sent twice to the speculating engine return the same rows; how many rows equal
  the plain engine's at the same seeds is reported beside, without a verdict (exact rejection sampling spends its
  random numbers otherwise than plain sampling, so it need not couple them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import reduce

from decoders.audit.engines.greedy import greedy_checks, probabilities_check
from decoders.audit.engines.request import ENGINE_PROMPT
from decoders.audit.engines.sampled import SECOND_SIDE_SEED, compare_runs
from decoders.conformance_results import FAIL, NOT_OFFERED, PASS, REFUSED, ConformanceDocument, RowVerdict
from decoders.engines import open_engine
from decoders.engines.base import Engine, EngineSampling, add_counters, capability, recorded
from decoders.engines.registry import speculation_fixed
from plumbing.timing import host
from plumbing.validation import as_int, as_real

__all__ = [
    "GREEDY",
    "LAW",
    "LOGPROBS",
    "SEEDS",
    "LAW_SETTINGS",
    "ConformanceRow",
    "ConformanceRequest",
    "Sides",
    "conformance",
    "default_rows",
    "run_row",
    "run_battery",
    "conformance_lines",
]

GREEDY, LAW, LOGPROBS, SEEDS = "greedy", "law", "logprobs", "seeds"

#: A second prompt for the greedy rows: open prose, where a draft of copied text is rejected more often.
PROSE_PROMPT = "<|im_start|>user\nTell me about the sea in three sentences.<|im_end|>\n<|im_start|>assistant\n"

#: The sampled settings (name -> sampling): T = 1; top-p where it keeps more than one token on the audit's prompt
#: (at T = 0.7 top-p 0.9 is a point mass there: docs/findings/vllm.md); top-k, min-p and llama.cpp's repeat penalty.
LAW_SETTINGS = {
    "t1": EngineSampling(1.0),
    "t1_top_p0.9": EngineSampling(1.0, top_p=0.9),
    "top_k20": EngineSampling(1.0, top_k=20),
    "min_p0.1": EngineSampling(1.0, min_p=0.1),
    "repeat_penalty1.2": EngineSampling(1.0, repeat_penalty=1.2),
}


@dataclass(frozen=True)
class ConformanceRow:
    """One row: ``name``, ``kind``, the ``sampling`` sent, the ``prompts``, tokens a sample (``horizon``), samples a
    side (``n``: law and seeds), and the draft lengths (``gammas``) of an engine that speculates per request."""

    name: str
    kind: str
    sampling: EngineSampling = field(default_factory=EngineSampling)
    prompts: tuple = (ENGINE_PROMPT,)
    horizon: int = 4
    n: int = 2000
    gammas: tuple = (2, 4)

    def __post_init__(self) -> None:
        if self.kind not in (GREEDY, LAW, LOGPROBS, SEEDS):
            raise ValueError(f"conformance row kind must be one of greedy, law, logprobs, seeds, got {self.kind!r}")
        as_int("horizon", self.horizon, low=1, high=1024)
        as_int("n", self.n, low=2, high=1_000_000)
        for gamma in self.gammas:
            as_int("gammas", gamma, low=1, high=64)

    @property
    def sent(self) -> str:
        """What the row sends, in a line."""
        words = "greedy" if self.kind in (GREEDY, LOGPROBS) else self.sampling.describe()
        return f"{words}; {len(self.prompts)} prompt(s), {self.horizon} tokens"


@dataclass(frozen=True)
class Sides:
    """The engine with speculation and without: one engine asked at a draft length and at 0 (``plain`` None), or a
    server that speculates by its own settings beside a plain one (``plain``)."""

    engine: Engine
    plain: Engine | None = None

    def speculating(self, row: ConformanceRow) -> list:
        """The draft lengths the row's speculating runs ask for: the row's, or 0 (its own settings) for a server."""
        return [0] if self.plain is not None else list(row.gammas)

    def without(self) -> tuple:
        """(engine, speculate) of the plain side."""
        return (self.plain, 0) if self.plain is not None else (self.engine, 0)


def default_rows(n: int = 2000, horizon: int = 4, gammas: tuple = (2, 4)) -> list:
    """The battery (docs/conformance.md): greedy on two prompts, each sampled setting of ``LAW_SETTINGS``, the
    reported log-probabilities, and seeded requests repeated."""
    rows = [
        ConformanceRow("greedy", GREEDY, EngineSampling(0.0), (ENGINE_PROMPT, PROSE_PROMPT), 32, n, gammas),
        ConformanceRow("logprobs", LOGPROBS, EngineSampling(0.0), (ENGINE_PROMPT,), 16, n, gammas),
    ]
    rows += [
        ConformanceRow(f"law_{name}", LAW, sampling, (ENGINE_PROMPT,), horizon, n, gammas)
        for name, sampling in LAW_SETTINGS.items()
    ]
    rows.append(ConformanceRow("seeds", SEEDS, EngineSampling(1.0), (ENGINE_PROMPT,), horizon, min(n, 200), gammas))
    return rows


def run_row(sides: Sides, row: ConformanceRow, level: float = 0.01) -> RowVerdict:
    """``row`` against ``sides`` (module docstring): its verdict."""
    started = time.perf_counter()
    refused = _refusal(sides, row)
    if refused:
        return _verdict(row, "the engine's own check, before any request", REFUSED, refused)
    verdict = {GREEDY: _greedy, LAW: _law, LOGPROBS: _logprobs, SEEDS: _seeds}[row.kind](sides, row, level)
    return replace(verdict, seconds=time.perf_counter() - started)


def _verdict(row, test, verdict, details, **measured):
    return RowVerdict(
        name=row.name,
        kind=row.kind,
        sent=row.sent,
        test=test,
        verdict=verdict,
        counters=measured.pop("counters", {}),
        details=details,
        **measured,
    )


def _refusal(sides: Sides, row: ConformanceRow) -> str | None:
    """The engine's own refusal of the row's sampling under speculation (its ``check_sampling``), in a line."""
    check = capability(sides.engine, "check_sampling")
    if check is None or sides.plain is not None:
        return None
    try:
        for gamma in row.gammas:
            check(row.sampling, gamma)
    except ValueError as refusal:
        return str(refusal)
    return None


def _greedy(sides: Sides, row: ConformanceRow, level: float):
    """Greedy identity on every prompt at every draft length (a server pair: the two servers' tokens)."""
    differences, compared, counters = [], 0, {}
    for prompt in row.prompts:
        if sides.plain is None:
            _, checks = greedy_checks(sides.engine, prompt, row.horizon, row.gammas)
            for check in checks:
                compared += 1
                counters = add_counters(counters, check.counters)
                if not check.equal:
                    why = check.diagnosis.verdict if check.diagnosis else "not diagnosed (no logits)"
                    differences.append((check.gamma, check.first_difference, why))
        else:
            greedy = EngineSampling(0.0)
            a = sides.engine.generate(prompt, 1, row.horizon, greedy).rows[0]
            b = sides.plain.generate(prompt, 1, row.horizon, greedy).rows[0]
            compared += 1
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
            if first is not None:
                differences.append((None, first, "not diagnosed (two servers)"))
    bugs = [d for d in differences if not d[2].startswith("batch-shape")]
    details = f"{compared - len(differences)} of {compared} equal" + "".join(
        f"; gamma {g}: differs at token {i} ({why})" for g, i, why in differences[:4]
    )
    test = "token identity with plain greedy decoding (each difference diagnosed)"
    return _verdict(row, test, FAIL if bugs else PASS, details, n=compared, counters=counters)


def _law(sides: Sides, row: ConformanceRow, level: float):
    """The two-sample test of the speculating samples (each draft length in turn, n each) against plain ones."""
    plain_engine, plain_speculate = sides.without()
    (prompt,) = row.prompts[:1]
    plain = plain_engine.generate(
        prompt, row.n, row.horizon, row.sampling, speculate=plain_speculate, seed=SECOND_SIDE_SEED
    )
    reports, counters = [], {}
    for gamma in sides.speculating(row):
        run = sides.engine.generate(prompt, row.n, row.horizon, row.sampling, speculate=gamma, seed=0)
        counters = add_counters(counters, run.counters)
        reports.append((gamma, compare_runs(run, plain, level / len(sides.speculating(row)))))
    p_value = min(1.0, len(reports) * min(report.p_value for _, report in reports))
    failed = [gamma for gamma, report in reports if not report.passed]
    details = "; ".join(f"gamma {gamma}: p = {report.p_value:.3g}" for gamma, report in reports)
    return _verdict(
        row,
        "two-sample battery, speculating against plain samples (disjoint seeds), Bonferroni over draft lengths",
        FAIL if failed else PASS,
        details,
        n=row.n,
        p_value=p_value,
        detectable=max(report.detectable_tv for _, report in reports),
        counters=counters,
    )


def _logprobs(sides: Sides, row: ConformanceRow, level: float):
    """The reported log-probabilities of the greedy tokens with speculation against without."""
    token_logprobs, tokenize = capability(sides.engine, "token_logprobs"), capability(sides.engine, "tokenize")
    test = "reported log-probability of each greedy token within the tolerance, and the same top ids"
    if token_logprobs is None or tokenize is None or sides.plain is not None:
        return _verdict(
            row, test, NOT_OFFERED, "the engine reports no per-token log-probabilities here (token_logprobs)"
        )
    found = probabilities_check(token_logprobs, list(tokenize(row.prompts[0])), row.horizon, row.gammas)
    compared = sum(check.compared for check in found.checks)
    wrong = sum(check.wrong for check in found.checks)
    first = next((check.first_wrong for check in found.checks if check.first_wrong), None)
    details = f"{compared - wrong} of {compared} tokens agree (tolerance {found.tolerance:g} nats)" + (
        f"; first wrong at token {first.position}: {first.reported_logprob:.4f} reported, "
        f"{first.plain_logprob:.4f} plain"
        if first
        else ""
    )
    return _verdict(row, test, PASS if found.passed else FAIL, details, n=compared)


def _seeds(sides: Sides, row: ConformanceRow, level: float):
    """Seeded requests sent twice to the speculating engine: the same rows; agreement with plain reported."""
    (prompt,) = row.prompts[:1]
    gamma = sides.speculating(row)[-1]
    first, again = (
        sides.engine.generate(prompt, row.n, row.horizon, row.sampling, speculate=gamma, seed=7) for _ in range(2)
    )
    plain_engine, plain_speculate = sides.without()
    plain = plain_engine.generate(prompt, row.n, row.horizon, row.sampling, speculate=plain_speculate, seed=7)
    differ = sum(a != b for a, b in zip(first.rows, again.rows)) + abs(len(first.rows) - len(again.rows))
    coupled = sum(a == b for a, b in zip(first.rows, plain.rows))
    details = (
        f"{row.n - differ} of {row.n} seeded rows repeat exactly at draft length {gamma}; {coupled} of {row.n} equal "
        "the plain engine's at the same seeds (no verdict: exact speculation need not couple them)"
    )
    counters = reduce(add_counters, (first.counters, again.counters), {})
    test = "the same seeded requests twice: identical rows"
    return _verdict(row, test, FAIL if differ else PASS, details, n=row.n, counters=counters)


def run_battery(sides: Sides, rows: list, level: float = 0.01, progress=None, against: str | None = None):
    """Every row of ``rows`` against ``sides``, in order: a ``ConformanceDocument``. The rows of a server that
    speculates per request run one draft length's server at a time (``decoders.engines.server.ServerPool``)."""
    started = time.perf_counter()
    verdicts = []
    for row in rows:
        verdicts.append(run_row(sides, row, level))
        if progress:
            progress(1)
    settings, version = recorded(sides.engine)
    return ConformanceDocument(
        engine=sides.engine.name,
        against=against,
        engine_version=version,
        engine_settings=settings,
        rows=tuple(verdicts),
        level=level,
        seconds=time.perf_counter() - started,
        environment=host(),
    )


def conformance_lines(document) -> list:
    """The battery as printed lines: a row a line, then the verdict."""
    d = document
    lines = [
        f"conformance: {d.engine}"
        + (f" against {d.against}" if d.against else " against itself without speculation")
        + (f" (version {d.engine_version})" if d.engine_version else "")
        + f"; level {d.level:g} a row"
    ]
    width = max(len(row.name) for row in d.rows)
    for row in d.rows:
        p = "" if row.p_value is None else f"; row p = {row.p_value:.3g}"
        tv = "" if row.detectable is None else f", detects TV {row.detectable:.3f}"
        lines.append(f"{row.name:<{width}} {row.verdict:<11} {row.details}{p}{tv} [{row.sent}; {row.seconds:.0f} s]")
    failed = [row.name for row in d.rows if row.verdict == FAIL]
    lines.append(f"{len(failed)} of {len(d.rows)} rows failed" + (f": {', '.join(failed)}" if failed else ""))
    return lines


@dataclass(frozen=True)
class ConformanceRequest:
    """What `spectheory conformance` runs, checked before any engine opens: ``engine`` (and ``against``, the plain
    server of an engine URL that speculates by its own settings), the GGUF file a local engine reads (``target``),
    the ``rows`` by name (empty: all), their sizes, each row's ``level`` and the requests in flight to a server."""

    engine: str
    against: str | None = None
    target: str | None = None
    rows: tuple = ()
    n: int = 2000
    horizon: int = 4
    gammas: tuple = (2, 4)
    level: float = 0.01
    concurrency: int = 4

    def __post_init__(self) -> None:
        as_real("level", self.level, low=0.0, high=0.5, low_open=True)
        as_int("concurrency", self.concurrency, low=1, high=256)
        names = [row.name for row in default_rows()]
        unknown = [name for name in self.rows if name not in names]
        if unknown:
            raise ValueError(f"rows {' '.join(unknown)}: no such row; the rows are {', '.join(names)}")
        if speculation_fixed(self.engine) != (self.against is not None):
            raise ValueError(
                "--against URL names the plain server of an --engine URL that speculates by its own settings, and "
                f"only then (got --engine {self.engine}" + (f" --against {self.against})" if self.against else ")")
            )
        self.battery()  # sizes checked here, before any engine opens

    def battery(self) -> list:
        """The rows asked for, at the request's sizes."""
        rows = default_rows(self.n, self.horizon, tuple(self.gammas))
        return [row for row in rows if not self.rows or row.name in self.rows]


def conformance(request: ConformanceRequest, progress=None):
    """``request``'s battery: the engines opened (the plain server first, so that a dead URL fails before a server
    starts), every row run, every server the engines started stopped however the run ends."""
    opened = {"gguf": request.target, "concurrency": request.concurrency}
    plain = open_engine(request.against, **opened) if request.against else None
    engines = [plain]
    try:
        engines.append(open_engine(request.engine, **opened))
        return run_battery(Sides(engines[-1], plain), request.battery(), request.level, progress, request.against)
    finally:
        for engine in engines:
            close = getattr(engine, "close", None)
            if close:
                close()
