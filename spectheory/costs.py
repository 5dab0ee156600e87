"""Walltime with measured costs (docs/theory.md §10): the speedup a decoder realises, from a cost profile.

Theorem 3.8 charges an iteration gamma draft calls and one target call. A real decoder pays more: a draft
*step* (call, sampling, bookkeeping) ``t_draft``, verifying gamma + 1 positions ``t_verify(gamma + 1)``, the
accept / correct / rollback work of the iteration ``t_iteration``, against ``t_step`` per token for the
autoregressive decoder (call and sampling). Then

    speedup(gamma) = E[tokens per iteration](gamma) * t_step / (gamma t_draft + t_verify(gamma + 1) + t_iteration),

with E[tokens] from Eq. 1 at alpha or from per-position acceptance rates a_1..a_gamma. Theorem 3.8 is the
case t_draft = c t_step, t_verify = t_step, t_iteration = 0. When t_verify(k) = v0 + v1 k is affine,
speedup(gamma) = efficiency * S(alpha, gamma, c_eff) with T0 = v0 + v1 + t_iteration, c_eff =
(t_draft + v1) / T0 and efficiency = t_step / T0: Theorem 3.8 at an effective c, scaled. So the optimal
gamma >= 1 is Theorem 3.8's at c_eff, and speculating pays only where that speedup exceeds 1.

Finite sequences add one-time costs: ``calibrated_sequence_speedup`` charges the prefill of each model.

At batch size b every cost is a call on b rows, and the batch iterates until its slowest row is done: its
iterations are the largest of its rows', replayed along each row's profiled text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from plumbing.outputs import strict_loads
from plumbing.validation import as_cost, as_count, as_positive_int, as_probability, as_real
from spectheory.cost_checks import CostChecks
from spectheory.metrics import per_position_from_conditional
from spectheory.optimum import beats, first_best
from spectheory.positional import expected_iterations_along, expected_tokens_positional
from spectheory.speedup import expected_tokens, optimal_gamma, walltime_improvement

#: The ``kind`` of a cost-profile document (``spectheory profile --out``; read by ``gamma --costs``).
PROFILE_KIND = "spectheory cost profile"

__all__ = [
    "PROFILE_KIND",
    "CostProfile",
    "iteration_seconds",
    "width_priced",
    "forecast_speedup",
    "calibrated_speedup",
    "effective_cost",
    "affine_speedup",
    "affine_optimal_gamma",
    "calibrated_sequence_speedup",
    "batch_schedule",
    "schedule_settings",
    "load_profile",
    "text_profile",
    "profile_entries",
]


def _positive(name: str, value) -> np.ndarray:
    return as_real(name, value, low=0.0, low_open=True, high=np.finfo(np.float64).max)


def iteration_seconds(gamma, t_draft, t_verify, t_iteration=0.0) -> np.ndarray:
    """gamma t_draft + t_verify + t_iteration: one iteration, with ``t_verify`` the cost of its gamma + 1
    positions."""
    gamma = as_count("gamma", gamma)
    return gamma * as_cost("t_draft", t_draft) + as_cost("t_verify", t_verify) + as_cost("t_iteration", t_iteration)


def calibrated_speedup(tokens_per_iteration, t_step, seconds_per_iteration) -> np.ndarray:
    """E[tokens per iteration] * t_step / seconds per iteration: tokens per second over the autoregressive
    decoder's."""
    tokens = as_real("tokens_per_iteration", tokens_per_iteration, low=1.0)
    return tokens * _positive("t_step", t_step) / _positive("seconds_per_iteration", seconds_per_iteration)


def effective_cost(t_step, t_draft, verify_intercept, verify_slope, t_iteration=0.0) -> tuple:
    """(c_eff, efficiency) of an affine verify cost v0 + v1 k: c_eff = (t_draft + v1) / T0 and efficiency =
    t_step / T0 with T0 = v0 + v1 + t_iteration, the cost of an iteration with gamma = 0."""
    t_draft, v1 = as_cost("t_draft", t_draft), as_cost("verify_slope", verify_slope)
    base = as_real("verify_intercept", verify_intercept) + v1 + as_cost("t_iteration", t_iteration)
    base = _positive("verify_intercept + verify_slope + t_iteration", base)
    return (t_draft + v1) / base, _positive("t_step", t_step) / base


def affine_speedup(alpha, gamma, t_step, t_draft, verify_intercept, verify_slope, t_iteration=0.0) -> np.ndarray:
    """efficiency * Theorem 3.8 at c_eff (``effective_cost``): the calibrated speedup under Eq. 1."""
    c_eff, efficiency = effective_cost(t_step, t_draft, verify_intercept, verify_slope, t_iteration)
    return efficiency * walltime_improvement(alpha, gamma, c_eff)


def affine_optimal_gamma(
    alpha, t_step, t_draft, verify_intercept, verify_slope, t_iteration=0.0, *, gamma_max: int = 16
) -> np.ndarray:
    """The gamma in [0, gamma_max] with the largest calibrated speedup, 0 meaning autoregressive decoding
    (speedup 1): Theorem 3.8's optimum at c_eff, at least 1, kept where its speedup beats 1 (``spectheory.optimum``)."""
    c_eff, efficiency = effective_cost(t_step, t_draft, verify_intercept, verify_slope, t_iteration)
    alpha = as_probability("alpha", alpha)
    best = np.maximum(optimal_gamma(alpha, c_eff, gamma_max), 1)
    return np.where(beats(efficiency * walltime_improvement(alpha, best, c_eff), 1.0), best, 0)


def calibrated_sequence_speedup(
    tokens, tokens_per_iteration, t_step, seconds_per_iteration, *, target_prefill=0.0, draft_prefill=0.0
) -> np.ndarray:
    """The speedup on sequences of ``tokens`` new tokens after a prompt: (target_prefill + tokens t_step) /
    (target_prefill + draft_prefill + tokens / E[tokens per iteration] * seconds per iteration). It tends to
    ``calibrated_speedup`` as tokens grow."""
    tokens = _positive("tokens", tokens)
    per_iteration = as_real("tokens_per_iteration", tokens_per_iteration, low=1.0)
    target_prefill, draft_prefill = as_cost("target_prefill", target_prefill), as_cost("draft_prefill", draft_prefill)
    autoregressive = target_prefill + tokens * _positive("t_step", t_step)
    speculative = (
        target_prefill
        + draft_prefill
        + tokens / per_iteration * _positive("seconds_per_iteration", seconds_per_iteration)
    )
    return autoregressive / speculative


def width_priced(t_verify, widths: dict) -> float:
    """The verify call's expected seconds over the widths an iteration verifies: sum_k f_k t_verify(k) / sum_k f_k,
    ``widths`` {k: f_k} (counts or fractions) with k = 1..len(t_verify); a fractional k (a mean width, where only the
    mean is known) is priced between its neighbours. The one place a verify call is priced by its width (docs/theory.md
    §10: on a CPU a call of 2-9 positions costs 1.4-1.8 steps, not one)."""
    t_verify = tuple(float(t) for t in _positive("t_verify", list(t_verify)))
    total = float(sum(widths.values()))
    if not widths or not total > 0 or min(widths.values()) < 0:
        raise ValueError(f"widths must give non-negative weights summing above 0, got {widths!r}")
    outside = [k for k in widths if not 1 <= k <= len(t_verify)]
    if outside:
        raise ValueError(
            f"widths {sorted(outside)} lie outside the measured t_verify(1..{len(t_verify)}): measure wider calls"
        )
    return float(sum(f * np.interp(k, np.arange(1, len(t_verify) + 1), t_verify) for k, f in widths.items()) / total)


def forecast_speedup(
    tokens_per_iteration,
    t_step,
    verify_seconds,
    other_seconds=0.0,
    *,
    tokens=None,
    target_prefill=0.0,
    draft_prefill=0.0,
) -> float:
    """The one forecast of a speedup from measured costs (docs/forecasts.md, "One cost model behind every forecast"):
    an iteration yields ``tokens_per_iteration`` target tokens (counted along text) for ``verify_seconds`` (its verify
    call priced by the widths it verifies, ``width_priced``) plus ``other_seconds`` (its draft calls and the round's
    own work), against ``t_step`` per autoregressive token; on sequences of ``tokens`` new tokens with the prefills
    (``calibrated_sequence_speedup``), else per token (``calibrated_speedup``). Every path that forecasts (chains,
    trees, policies, Spec-Bench, the engines, the cross-vocabulary methods) calls it; a test holds them to it."""
    seconds = as_cost("verify_seconds", verify_seconds) + as_cost("other_seconds", other_seconds)
    if tokens is None:
        return float(calibrated_speedup(tokens_per_iteration, t_step, seconds))
    return float(
        calibrated_sequence_speedup(
            tokens,
            tokens_per_iteration,
            t_step,
            seconds,
            target_prefill=target_prefill,
            draft_prefill=draft_prefill,
        )
    )


@dataclass(frozen=True)
class CostProfile:
    """Measured costs of one pair at one device, dtype, batch size and temperature, in seconds.

    ``t_verify[k - 1]`` verifies k positions (k = 1..len, at least gamma_max + 1; more for trees, docs/theory-trees.md
    §12); ``acceptance[i - 1]`` is a_i, the rate at which
    draft position i is accepted given positions 1..i-1 were. Prefill costs are per sequence."""

    t_step: float
    t_draft: float
    t_verify: tuple
    t_iteration: float
    acceptance: tuple
    target_prefill: float = 0.0
    draft_prefill: float = 0.0
    alpha: float | None = None  # pooled accepted / verified draft tokens of the profiling run
    c: float | None = None  # one-token draft call / target call, Theorem 3.8's c
    acceptance_along_text: tuple = ()  # per text: the acceptance at each position (expected_iterations_along)
    batch_size: int = 1  # rows per call; acceptance_along_text holds whole batches of texts, batch by batch
    # A draft that may propose fewer than gamma tokens (copy): the fraction of iterations at gamma_max whose
    # longest proposal was m = 0..gamma_max, each verifying min(m, gamma) + 1 positions; () when always gamma.
    proposal_fractions: tuple = ()
    # Measured draft-and-rest seconds per iteration at gamma = 1..gamma_max (profiled at a few gammas and
    # interpolated, docs/theory.md §10); () for the line gamma t_draft + t_iteration.
    t_overhead: tuple = ()

    def __post_init__(self) -> None:
        _positive("t_step", self.t_step)
        for name in ("t_draft", "t_iteration", "target_prefill", "draft_prefill"):
            as_cost(name, getattr(self, name))
        if len(self.t_verify) < 2 or not 1 <= len(self.acceptance) <= len(self.t_verify) - 1:
            raise ValueError(
                f"a cost profile needs acceptance for positions 1..gamma_max and t_verify for at least "
                f"k = 1..gamma_max + 1, got {len(self.acceptance)} and {len(self.t_verify)} values"
            )
        _positive("t_verify", self.t_verify)
        as_probability("acceptance", self.acceptance)
        if self.alpha is not None:
            as_probability("alpha", self.alpha)
        if self.c is not None:
            as_cost("c", self.c)
        for text in self.acceptance_along_text:
            as_probability("acceptance_along_text", text)
        as_positive_int("batch_size", self.batch_size)
        if self.proposal_fractions:
            as_probability("proposal_fractions", self.proposal_fractions)
            if len(self.proposal_fractions) != len(self.acceptance) + 1 or abs(sum(self.proposal_fractions) - 1) > 1e-6:
                raise ValueError(
                    f"proposal_fractions must give m = 0..gamma_max ({len(self.acceptance) + 1} values) "
                    f"summing to 1, got {list(self.proposal_fractions)}"
                )
        if self.t_overhead:
            as_cost("t_overhead", self.t_overhead)
            if len(self.t_overhead) != len(self.acceptance):
                raise ValueError(
                    f"t_overhead must give gamma = 1..gamma_max ({len(self.acceptance)} values), "
                    f"got {len(self.t_overhead)}"
                )
        if len(self.acceptance_along_text) % self.batch_size:
            raise ValueError(
                f"acceptance_along_text must hold whole batches of {self.batch_size} texts, "
                f"got {len(self.acceptance_along_text)}"
            )

    @classmethod
    def from_dict(cls, entries: dict) -> "CostProfile":
        """The profile of a JSON object (``as_dict``'s keys; others are ignored); a ValueError names what is
        missing or wrong."""
        if not isinstance(entries, dict):
            raise ValueError(f"a cost profile must be a JSON object, got {type(entries).__name__}")
        required = ("t_step", "t_draft", "t_verify", "t_iteration", "acceptance")
        missing = [key for key in required if key not in entries]
        if missing:
            raise ValueError(f"a cost profile needs {', '.join(missing)}")
        optional = ("target_prefill", "draft_prefill", "alpha", "c", "batch_size", "proposal_fractions", "t_overhead")
        values = {key: entries[key] for key in required + optional if key in entries}
        texts = entries.get("acceptance_along_text", [])
        if (
            not all(isinstance(values[key], list) for key in ("t_verify", "acceptance"))
            or not isinstance(texts, list)
            or not all(isinstance(text, list) for text in texts)
        ):
            raise ValueError("t_verify, acceptance and acceptance_along_text must be lists of numbers")
        for key in ("proposal_fractions", "t_overhead"):
            if not isinstance(values.get(key, []), list):
                raise ValueError(f"{key} must be a list of numbers")
        return cls(
            **dict(
                values,
                t_verify=tuple(values["t_verify"]),
                acceptance=tuple(values["acceptance"]),
                proposal_fractions=tuple(values.get("proposal_fractions", ())),
                t_overhead=tuple(values.get("t_overhead", ())),
                acceptance_along_text=tuple(tuple(text) for text in texts),
            )
        )

    @property
    def gamma_max(self) -> int:
        return len(self.acceptance)

    def _check_gamma(self, gamma: int) -> int:
        gamma = int(as_count("gamma", gamma))
        if not 1 <= gamma <= self.gamma_max:
            raise ValueError(f"gamma must be in [1, {self.gamma_max}] for this cost profile, got {gamma}")
        return gamma

    def tokens_per_iteration(self, gamma: int, alpha=None, *, along_text: bool = True) -> float:
        """Eq. 1 at ``alpha``; else the measured acceptance replayed along the profiled texts
        (``expected_iterations_along``) where the profile holds them and ``along_text``, a batch's iterations
        being its slowest row's; else the positional formula at the measured a_1..a_gamma."""
        gamma = self._check_gamma(gamma)
        if alpha is not None:
            return float(expected_tokens(alpha, gamma))
        if along_text and self.acceptance_along_text:
            texts, b = self.acceptance_along_text, self.batch_size
            batches = [texts[i : i + b] for i in range(0, len(texts), b)]
            tokens = sum(max(len(text) for text in batch) for batch in batches)
            return tokens / sum(max(expected_iterations_along(text, gamma) for text in batch) for batch in batches)
        return float(expected_tokens_positional(self.acceptance[:gamma]))

    def verify_seconds(self, gamma: int) -> float:
        """The verify call of an iteration at ``gamma``: t_verify(gamma + 1), or its mean over the proposal
        lengths where the draft proposes fewer (``proposal_fractions``)."""
        gamma = self._check_gamma(gamma)
        if not self.proposal_fractions:
            return width_priced(self.t_verify, {gamma + 1: 1.0})
        return sum(
            f * width_priced(self.t_verify, {min(m, gamma) + 1: 1.0}) for m, f in enumerate(self.proposal_fractions)
        )

    def overhead_seconds(self, drafts: int) -> float:
        """An iteration's seconds but its verify call, when it drafts ``drafts`` >= 1 tokens: the measured
        ``t_overhead`` where the profile holds it, extended past gamma_max (a policy may draft more) by
        t_draft per token; else drafts t_draft + t_iteration."""
        drafts = int(as_count("drafts", drafts))
        if drafts < 1:
            raise ValueError(f"drafts must be at least 1 (an iteration without drafts is a target step), got {drafts}")
        if not self.t_overhead:
            return float(iteration_seconds(drafts, self.t_draft, 0.0, self.t_iteration))
        last = len(self.t_overhead)
        return self.t_overhead[min(drafts, last) - 1] + max(drafts - last, 0) * self.t_draft

    def with_acceptance(self, acceptance) -> "CostProfile":
        """These costs at another acceptance a_1..a_g (e.g. measured on other text): the proposal lengths folded
        at g (an iteration at gamma verifies min(m, gamma) + 1 positions), the overheads cut at g or extended
        (``_overheads``), the profiled texts dropped. Past the profiled gamma_max a short-proposing draft's
        lengths are unknown: refused."""
        g = len(acceptance)
        fractions = self.proposal_fractions
        if fractions and g > self.gamma_max:
            raise ValueError(
                f"acceptance gives {g} positions, but this profile measured the draft's proposal lengths "
                f"up to gamma_max {self.gamma_max}: profile at --gamma-max {g} or give at most "
                f"{self.gamma_max} values"
            )
        return replace(
            self,
            acceptance=tuple(acceptance),
            acceptance_along_text=(),
            t_overhead=self._overheads(g),
            proposal_fractions=fractions[:g] + (sum(fractions[g:]),) if fractions else (),
        )

    def with_text(self, other: "CostProfile") -> "CostProfile":
        """These costs with what ``other`` measured of the text and the draft: its acceptance, its outcomes along
        the texts (kept where both profiles decode as many rows per call) and its proposal lengths. Costs from one
        device and acceptance from another are a forecast for the first (docs/gpu.md)."""
        texts = other.acceptance_along_text if other.batch_size == self.batch_size else ()
        return replace(
            self,
            acceptance=other.acceptance,
            acceptance_along_text=texts,
            alpha=other.alpha,
            proposal_fractions=other.proposal_fractions,
            t_overhead=self._overheads(other.gamma_max),
        )

    def _overheads(self, gamma_max: int) -> tuple:
        """``t_overhead`` at gamma = 1..gamma_max: cut, or extended by t_draft per token as ``overhead_seconds``
        does; () where the profile has none."""
        return tuple(self.overhead_seconds(d) for d in range(1, gamma_max + 1)) if self.t_overhead else ()

    def iteration_seconds(self, gamma: int) -> float:
        gamma = self._check_gamma(gamma)
        return self.overhead_seconds(gamma) + self.verify_seconds(gamma)

    def speedup(self, gamma: int, alpha=None, *, tokens: float | None = None) -> float:
        """The calibrated speedup at ``gamma`` (1 at gamma = 0); on sequences of ``tokens`` new tokens with
        the prefill costs when given, else per token."""
        if gamma == 0:
            return 1.0
        return forecast_speedup(
            self.tokens_per_iteration(gamma, alpha),
            self.t_step,
            self.verify_seconds(gamma),
            self.overhead_seconds(gamma),
            tokens=tokens,
            target_prefill=self.target_prefill,
            draft_prefill=self.draft_prefill,
        )

    def optimal_gamma(self, alpha=None, *, tokens: float | None = None) -> int:
        """The gamma in [0, gamma_max] with the largest calibrated speedup over the measured curve, ties going
        to the smaller gamma (``spectheory.optimum``)."""
        return first_best([self.speedup(gamma, alpha, tokens=tokens) for gamma in range(self.gamma_max + 1)])

    def as_dict(self) -> dict:
        """The fields, with ``acceptance`` also in the engines' names (docs/metrics.md; ``from_dict`` reads
        ``acceptance`` alone)."""
        return dict(
            asdict(self),
            t_verify=list(self.t_verify),
            acceptance=list(self.acceptance),
            conditional_acceptance_rate=list(self.acceptance),
            per_position_acceptance_rate=list(per_position_from_conditional(self.acceptance)),
            proposal_fractions=list(self.proposal_fractions),
            t_overhead=list(self.t_overhead),
            acceptance_along_text=[list(text) for text in self.acceptance_along_text],
        )


def batch_schedule(profiles: dict, tokens: int | None = None) -> list[dict]:
    """{batch size: CostProfile} -> per batch size, ascending: the optimal gamma and its predicted speedup
    (docs/theory.md §13; `spectheory schedule`)."""
    rows = []
    for batch, profile in sorted(profiles.items()):
        gamma = profile.optimal_gamma(tokens=tokens)
        rows.append(
            {
                "batch_size": batch,
                "gamma": gamma,
                "speedup": profile.speedup(gamma, tokens=tokens),
                "gamma_max": profile.gamma_max,
            }
        )
    return rows


def schedule_settings(rows: list[dict]) -> dict:
    """The schedule in the engines' words: ranges of batch sizes (up to the next measured size - 1, the last open)
    with their length, a {batch size: length} table, and SGLang-style candidates (the length and its neighbours)."""
    ranges = [[row["batch_size"], nxt["batch_size"] - 1, row["gamma"]] for row, nxt in zip(rows, rows[1:])]
    ranges.append([rows[-1]["batch_size"], None, rows[-1]["gamma"]])
    candidates = {
        row["batch_size"]: sorted({max(row["gamma"] - 2, 0), row["gamma"], min(row["gamma"] + 2, row["gamma_max"])})
        for row in rows
    }
    return {
        "num_speculative_tokens_per_batch_size": ranges,
        "draft_len_schedule": {row["batch_size"]: row["gamma"] for row in rows},
        "sglang_candidate_steps": candidates,
    }


def _read_json(path: str, what: str):
    """The strict JSON in ``path``; one-line errors naming ``what`` for a missing or malformed file."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{what} {path!r} does not exist")
    try:
        return strict_loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{what} {path!r} is not JSON ({error})") from None


def load_profile(path: str) -> dict:
    """The profile entries of a `spectheory profile` file; one-line errors for a missing, malformed or
    foreign file."""
    document = _read_json(path, "cost profile")
    if (
        not isinstance(document, dict)
        or document.get("kind") != PROFILE_KIND
        or not isinstance(document.get("profile"), dict)
    ):
        raise ValueError(f"{path!r} is not a cost profile (write one with `spectheory profile --out`)")
    checks = CostChecks.from_dict(document["checks"]) if isinstance(document.get("checks"), dict) else None
    if checks and not checks.passed:
        raise ValueError(
            f"cost profile {path!r} failed its checks when measured ({checks.failed[0].words}): rerun "
            "`spectheory profile` with nothing else running"
        )
    return document


def text_profile(path: str) -> dict:
    """The profile entries measured along text in a `spectheory profile` file, or in a `spectheory bench` file
    that holds a profile at one temperature (``--acceptance-from``)."""
    document = _read_json(path, "--acceptance-from")
    if (
        isinstance(document, dict)
        and document.get("kind") == PROFILE_KIND
        and isinstance(document.get("profile"), dict)
    ):
        return document["profile"]
    profiles = document.get("profiles") if isinstance(document, dict) else None
    if isinstance(profiles, dict) and len(profiles) == 1 and isinstance(next(iter(profiles.values())), dict):
        return next(iter(profiles.values()))
    raise ValueError(
        f"--acceptance-from {path!r} is neither a cost profile nor a bench file with a profile at one temperature"
    )


def profile_entries(
    costs: str | None,
    flags: dict,
    *,
    pair=None,
    acceptance=None,
    acceptance_from: str | None = None,
    alpha: float | None = None,
) -> tuple[dict, str]:
    """The entries of a cost profile for the gamma calculator and what they describe: the `spectheory profile`
    file ``costs`` (refused when of another ``pair`` (target, draft)), overridden by ``flags`` (seconds: t_step,
    t_draft, t_iteration, the list t_verify), with the acceptance of ``acceptance_from`` (another profile or
    bench file), of ``acceptance`` (per position) or of ``alpha`` at every position (docs/theory.md §10)."""
    entries, described = {}, "flags"
    if costs:
        document = load_profile(costs)
        entries, described = dict(document["profile"]), f"{document['target']} with draft {document['draft']}"
        if pair and list(pair) != [document["target"], document["draft"]]:
            raise ValueError(
                f"cost profile {costs!r} is of {document['target']} with draft {document['draft']}, "
                f"not of {pair[0]} with draft {pair[1]}"
            )
    entries.update(flags)
    if acceptance_from is not None:
        if acceptance is not None or alpha is not None or not costs:
            raise ValueError("--acceptance-from goes with --costs, without --acceptance or --alpha")
        text = CostProfile.from_dict(text_profile(acceptance_from))
        return CostProfile.from_dict(entries).with_text(text).as_dict(), f"{described}, acceptance of {acceptance_from}"
    if acceptance is not None or not costs:
        if acceptance is None and alpha is None:
            raise ValueError("measured costs without a profile need --alpha or --acceptance")
        acceptance = list(acceptance or [alpha] * (len(entries.get("t_verify", [None, None])) - 1))
        if costs:  # the profile's proposal lengths and overheads refitted to these positions
            entries = CostProfile.from_dict(entries).with_acceptance(acceptance).as_dict()
        entries["acceptance"] = acceptance
        entries["acceptance_along_text"] = []
    entries.setdefault("t_iteration", 0.0)
    return entries, described
