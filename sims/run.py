"""One simulation held against its closed form, run in chunks with a progress bar: ``spectheory simulate``.

A ``SimulationSpec`` names the acceptance process and its parameters; ``run_simulation`` draws the
iterations chunk by chunk (memory stays bounded, the bar moves), pools the chunks' sufficient
statistics, and returns a ``SimulationSummary`` with the simulated and the theoretical tokens per
iteration and speedup (Theorem 3.8: tokens / (gamma c + 1) in units of target calls).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from plumbing.validation import as_cost, as_int, as_probability
from sims._stats import Estimate, Moments, as_generator
from sims.acceptance import simulate_iid, simulate_markov, simulate_positional
from sims.families import family_contexts
from sims.token_level import simulate_speculative
from spectheory.positional import (
    MarkovAcceptance,
    accepted_count_distribution,
    expected_tokens_positional,
    markov_expected_tokens,
)
from spectheory.speedup import expected_tokens

__all__ = ["PROCESSES", "SimulationSpec", "SimulationSummary", "run_simulation"]

PROCESSES = ("iid", "positional", "markov", "token-level")

#: Iterations per chunk (streams per chunk for markov); a chunk is the unit of progress and of memory.
CHUNK = 1 << 16
MARKOV_CHUNK = 500

#: Counted iterations per Markov stream; ``iterations`` is split into streams of this length.
MARKOV_STREAM = 200
#: Upper bounds, checked before any work: a chunk holds CHUNK x gamma draws (at most 512 MB at gamma 1024),
#: a token-level context V probabilities, and 10^9 iterations take a minute (iid, gamma 4: 10^7 in 0.5 s) to an
#: hour (token-level: 10^5 in 0.3 s) on 2 CPU cores.
MAX_GAMMA, MAX_VOCABULARY, MAX_CONTEXTS, MAX_ITERATIONS = 1024, 10_000, 10_000, 10**9
#: The settings that only one kind of process reads, with the processes that read them.
PROCESS_SETTINGS = {
    "alpha": ("iid", "token-level"),
    "acceptance": ("positional",),
    "regime_acceptance": ("markov",),
    "transition": ("markov",),
    "family": ("token-level",),
    "vocabulary": ("token-level",),
    "contexts": ("token-level",),
    "lenience": ("token-level",),
    "verifier": ("token-level",),
}


@dataclass(frozen=True)
class SimulationSpec:
    """What to simulate. ``alpha`` for iid and token-level; ``acceptance`` ([gamma]) for positional;
    ``regime_acceptance`` ([K]) and ``transition`` ([K, K]) for markov; ``family``, ``vocabulary``,
    ``contexts``, ``lenience`` and ``verifier`` for token-level."""

    process: str
    gamma: int
    c: float = 0.0
    iterations: int = 100_000
    alpha: float | None = None
    acceptance: tuple | None = None
    regime_acceptance: tuple | None = None
    transition: tuple | None = None
    family: str = "mixture"
    vocabulary: int = 100
    contexts: int = 64
    lenience: float = 1.0
    verifier: str = "token"

    def __post_init__(self) -> None:
        if self.process not in PROCESSES:
            raise ValueError(f"process must be one of {PROCESSES}, got {self.process!r}")
        # gamma = 0 (no acceptance rates) is autoregressive decoding for the positional process
        as_int("gamma", self.gamma, low=0 if self.process == "positional" else 1, high=MAX_GAMMA)
        as_cost("c", self.c)
        as_int("iterations", self.iterations, low=1, high=MAX_ITERATIONS)
        as_int("vocabulary", self.vocabulary, low=1, high=MAX_VOCABULARY)
        as_int("contexts", self.contexts, low=1, high=MAX_CONTEXTS)
        defaults = {f.name: f.default for f in fields(self)}
        for name, processes in PROCESS_SETTINGS.items():
            if self.process not in processes and getattr(self, name) != defaults[name]:
                raise ValueError(
                    f"{name} applies to the {' and '.join(processes)} process only, got "
                    f"{name} = {getattr(self, name)!r} with process {self.process!r}"
                )
        needs = {"iid": "alpha", "token-level": "alpha", "positional": "acceptance", "markov": "regime_acceptance"}
        if getattr(self, needs[self.process]) is None:
            raise ValueError(f"process {self.process!r} needs {needs[self.process]}")
        if self.process in ("iid", "token-level"):
            as_probability("alpha", self.alpha)
        if self.process == "positional" and len(self.acceptance) != self.gamma:
            raise ValueError(f"acceptance must have gamma = {self.gamma} entries, got {len(self.acceptance)}")
        if self.process == "markov":
            self.chain()  # validates transition and regime_acceptance
        # token-level settings are checked where they are used: family_contexts and simulate_speculative

    def chain(self) -> MarkovAcceptance:
        """The Markov chain of a markov spec (``transition`` is row-major, K x K)."""
        regimes = len(self.regime_acceptance)
        if self.transition is None or len(self.transition) != regimes**2:
            raise ValueError(
                f"transition must have K^2 = {regimes**2} entries (row-major), got "
                f"{None if self.transition is None else len(self.transition)}"
            )
        return MarkovAcceptance(np.reshape(self.transition, (regimes, regimes)), np.asarray(self.regime_acceptance))


@dataclass(frozen=True)
class SimulationSummary:
    """Simulated against theoretical tokens per iteration and speedup; JSON-ready via ``as_dict``."""

    spec: SimulationSpec
    seed: int | None
    alpha: float
    mean_tokens_per_iteration: float
    standard_error: float
    theory_tokens_per_iteration: float
    speedup: float
    speedup_standard_error: float
    theory_speedup: float
    accepted_distribution: list
    theory_accepted_distribution: list | None
    extra: dict

    @property
    def z_score(self) -> float:
        """(simulated - theory) / standard error of the tokens per iteration."""
        estimate = Estimate(self.mean_tokens_per_iteration, self.standard_error, self.spec.iterations)
        return estimate.z_score(self.theory_tokens_per_iteration)

    #: Keys of the document that the spec and the estimates give again (``as_dict`` writes them beside the fields).
    DERIVED = ("process", "gamma", "c", "iterations", "z_score")

    def as_dict(self) -> dict:
        """The fields flat, what the spec gives beside them (``DERIVED``), ``extra`` flat, and the spec without its
        unset settings (the simulation figure's document holds one per run: ``sims.documents``)."""
        document = {key: value for key, value in asdict(self).items() if key not in ("spec", "extra")}
        document.update(
            process=self.spec.process,
            gamma=self.spec.gamma,
            c=self.spec.c,
            iterations=self.spec.iterations,
            z_score=self.z_score,
            **self.extra,
        )
        document["spec"] = {key: value for key, value in asdict(self.spec).items() if value is not None}
        return document

    @classmethod
    def from_dict(cls, saved: dict) -> SimulationSummary:
        """A summary as ``as_dict`` wrote it: the spec rebuilt, the derived keys set aside, the rest ``extra``."""
        own = {f.name for f in fields(cls)} - {"spec", "extra"}
        spec = {key: tuple(value) if isinstance(value, list) else value for key, value in saved["spec"].items()}
        return cls(
            spec=SimulationSpec(**spec),
            **{key: saved[key] for key in own},
            extra={key: value for key, value in saved.items() if key not in own | {"spec", *cls.DERIVED}},
        )


def _chunks(total: int, size: int, progress) -> list[int]:
    """``total`` split into chunks of ``size`` (the last one smaller), wrapped in ``progress``."""
    sizes = [size] * (total // size) + ([total % size] if total % size else [])
    return progress(sizes) if progress else sizes


def run_simulation(
    rng: np.random.Generator, spec: SimulationSpec, *, seed: int | None = None, progress=None
) -> SimulationSummary:
    """Simulate ``spec`` and set it beside its closed form; ``progress`` wraps the chunk loop (e.g. tqdm).

    For markov, ``iterations`` is split over streams of ``MARKOV_STREAM`` counted iterations (at least 2).
    """
    rng = as_generator(rng)
    if not isinstance(spec, SimulationSpec):
        raise ValueError(f"spec must be a SimulationSpec, got {type(spec).__name__}")
    tokens, histogram, extra = Moments(), np.zeros(spec.gamma + 1), {}
    if spec.process == "markov":
        chain = spec.chain()
        alpha, theory, theory_law = chain.mean_acceptance, markov_expected_tokens(chain, spec.gamma), None
        for streams in _chunks(max(2, spec.iterations // MARKOV_STREAM), MARKOV_CHUNK, progress):
            run = simulate_markov(rng, chain, spec.gamma, streams=streams, iterations_per_stream=MARKOV_STREAM)
            tokens += Moments.of(run.tokens_per_stream / run.iterations_per_stream)
            histogram += run.accepted_counts
        extra["eq1_at_mean_alpha"] = float(expected_tokens(alpha, spec.gamma))
    elif spec.process == "token-level":
        contexts = family_contexts(rng, spec.family, spec.vocabulary, spec.contexts, spec.alpha)
        alpha = contexts.alpha(spec.lenience)
        theory_law = accepted_count_distribution(np.full(spec.gamma, alpha)).tolist()
        theory = float(expected_tokens(alpha, spec.gamma))
        accepted, beta = Moments(), Moments()
        for size in _chunks(spec.iterations, CHUNK, progress):
            run = simulate_speculative(rng, contexts, spec.gamma, size, lenience=spec.lenience, verifier=spec.verifier)
            tokens += Moments.of(run.accepted + 1)
            histogram += np.bincount(run.accepted, minlength=spec.gamma + 1)
            accepted += run.acceptance_moments()
            beta += run.beta_moments()
        extra.update(
            alpha_from_acceptances=accepted.ratio().mean,
            alpha_from_beta=beta.ratio().mean,
            draft_calls=spec.iterations * spec.gamma,
            target_calls=spec.iterations,
        )
    else:
        rates = (
            np.full(spec.gamma, spec.alpha) if spec.process == "iid" else as_probability("acceptance", spec.acceptance)
        )
        alpha = float(np.mean(rates)) if len(rates) else 1.0
        theory = float(expected_tokens_positional(rates)) if len(rates) else 1.0
        theory_law = accepted_count_distribution(rates).tolist() if len(rates) else [1.0]
        for size in _chunks(spec.iterations, CHUNK, progress):
            run = (
                simulate_iid(rng, spec.alpha, spec.gamma, size)
                if spec.process == "iid"
                else simulate_positional(rng, rates, size)
            )
            tokens += Moments.of(run.accepted + 1)
            histogram += np.bincount(run.accepted, minlength=spec.gamma + 1)
    estimate = tokens.ratio()
    cost = spec.gamma * spec.c + 1  # target calls per iteration
    return SimulationSummary(
        spec,
        seed,
        float(alpha),
        estimate.mean,
        estimate.standard_error,
        float(theory),
        estimate.mean / cost,
        estimate.standard_error / cost,
        float(theory) / cost,
        (histogram / histogram.sum()).tolist(),
        theory_law,
        extra,
    )
