"""The simulators' documents, typed (``spectheory figs --recompute`` writes them, the figures read them): the
simulations beside their closed forms (``SimulationDocument``), the trees' expected tokens and the verifiers'
acceptance (``TreesDocument``) and the draft-length policies' gain grid (``PolicyGains``). ``as_dict`` is the JSON
edge, ``from_dict`` reads the committed files (the writer's ``command`` and ``provenance`` set aside by the reader)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sims.run import SimulationSummary

__all__ = [
    "SimulationDocument",
    "BudgetRow",
    "KaryPoint",
    "BudgetCase",
    "TreeBudgets",
    "VerifierCurves",
    "TreesDocument",
    "PolicyPeak",
    "PolicyGains",
]


@dataclass(frozen=True, kw_only=True)
class SimulationDocument:
    """The simulation figure's runs (``paper_figs.simulation_vs_theory``), seeded: one ``SimulationSummary`` each."""

    seed: int
    runs: tuple  # of sims.run.SimulationSummary

    def as_dict(self) -> dict:
        return {"seed": self.seed, "runs": [run.as_dict() for run in self.runs]}

    @classmethod
    def from_dict(cls, saved: dict) -> SimulationDocument:
        return cls(seed=saved["seed"], runs=tuple(map(SimulationSummary.from_dict, saved["runs"])))


@dataclass(frozen=True, kw_only=True)
class BudgetRow:
    """Expected tokens per call at one node budget: Sequoia's optimal tree (its depth), its simulation under the rank
    model with the standard error, and the chain of the same budget."""

    budget: int
    optimal: float
    optimal_depth: int
    simulated: float
    simulated_se: float
    chain: float


@dataclass(frozen=True, kw_only=True)
class KaryPoint:
    """A full k-ary tree: its nodes and expected tokens per call."""

    nodes: int
    expected_tokens: float


@dataclass(frozen=True, kw_only=True)
class BudgetCase:
    """One rank-acceptance vector's curves: a ``BudgetRow`` per budget and the k-ary trees' points ({k: points})."""

    acceptance: list
    rows: tuple  # of BudgetRow
    kary: dict  # "2", "3" -> tuple of KaryPoint

    def as_dict(self) -> dict:
        return {
            "acceptance": self.acceptance,
            "rows": [asdict(row) for row in self.rows],
            "kary": {k: [asdict(point) for point in points] for k, points in self.kary.items()},
        }

    @classmethod
    def from_dict(cls, saved: dict) -> BudgetCase:
        return cls(
            acceptance=saved["acceptance"],
            rows=tuple(BudgetRow(**row) for row in saved["rows"]),
            kary={k: tuple(KaryPoint(**point) for point in points) for k, points in saved["kary"].items()},
        )


@dataclass(frozen=True, kw_only=True)
class TreeBudgets:
    """``sims.trees.tree_budget_document``: its seed, trials, budgets and a ``BudgetCase`` per acceptance vector."""

    seed: int
    trials: int
    budgets: list
    acceptance: dict  # name -> BudgetCase

    def as_dict(self) -> dict:
        return {
            "seed": self.seed,
            "trials": self.trials,
            "budgets": self.budgets,
            "acceptance": {name: case.as_dict() for name, case in self.acceptance.items()},
        }

    @classmethod
    def from_dict(cls, saved: dict) -> TreeBudgets:
        cases = {name: BudgetCase.from_dict(case) for name, case in saved["acceptance"].items()}
        return cls(seed=saved["seed"], trials=saved["trials"], budgets=saved["budgets"], acceptance=cases)


@dataclass(frozen=True, kw_only=True)
class VerifierCurves:
    """``sims.trees.verifier_document``: acceptance against k of every verifier, the i.i.d. optimum and SpecTr's
    bound ({family: {curve: [value per k]}}), over ``pairs`` random pairs of ``vocabulary`` tokens."""

    seed: int
    vocabulary: int
    pairs: int
    ks: list
    families: dict

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, saved: dict) -> VerifierCurves:
        return cls(**saved)


@dataclass(frozen=True, kw_only=True)
class TreesDocument:
    """Both tree figures' results (``sims.trees.trees_document``)."""

    budgets: TreeBudgets
    verifiers: VerifierCurves

    def as_dict(self) -> dict:
        return {"budgets": self.budgets.as_dict(), "verifiers": self.verifiers.as_dict()}

    @classmethod
    def from_dict(cls, saved: dict) -> TreesDocument:
        return cls(
            budgets=TreeBudgets.from_dict(saved["budgets"]), verifiers=VerifierCurves.from_dict(saved["verifiers"])
        )


@dataclass(frozen=True, kw_only=True)
class PolicyPeak:
    """A policy's largest gain over the best fixed gamma on the grid, and where."""

    max_gain: float
    alpha: float
    c: float


@dataclass(frozen=True, kw_only=True)
class PolicyGains:
    """``sims.policies.policy_gain_document``: the seed, iterations and context family, each policy's
    ``PolicyPeak``, and the grid (``sims.policies.GainGrid.as_dict``: alphas, costs, each policy's gains
    [alpha][c], and each cell's comparison as written)."""

    seed: int
    iterations: int
    family: str
    peaks: dict  # policy -> PolicyPeak
    alphas: list
    cs: list
    theory_oracle: list
    oracle: list
    confidence: list
    rejection: list
    heuristic: list
    comparisons: list

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, saved: dict) -> PolicyGains:
        return cls(**dict(saved, peaks={name: PolicyPeak(**peak) for name, peak in saved["peaks"].items()}))
