"""The bench's documents, typed, in a module without torch so the report's document and the figures read them
(docs/measuring.md, "The bench's rows"): what a gamma sweep measured for one pair (``BenchReport``,
``decoders.bench.bench.bench_pair``), tree against chain (``TreeBench``, ``decoders.bench.tree_bench``), the
draft-length policies (``PolicyBench``, ``decoders.bench.policy_bench``), a draft of another tokenizer
(``CrossVocabularyBench``, ``decoders.bench.cross_bench``, with its forecast and, in the report, its audits) and a
measured cost profile (``ProfileDocument``, `spectheory profile --out`). ``as_dict`` is the JSON edge, ``from_dict``
reads a committed document of any vintage (a report's part, or the bench command's document, whose own keys beside
it ``BenchReport`` sets aside)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from decoders.audit.verdict import AuditVerdict
from decoders.bench.forecast.document import DynamicForecast, Judgement, SweepForecast
from decoders.bench.rows import (
    AlphaEstimate,
    BenchRow,
    BlockwiseRow,
    CategoryAlpha,
    CrossVocabularyRow,
    HFComparisonRow,
    LenienceRow,
    PolicyRow,
    TransformersRow,
    TreeRow,
)
from decoders.results import ResultRow, by_temperature
from spectheory.cost_checks import CostChecks
from spectheory.costs import PROFILE_KIND, CostProfile
from spectheory.optimum import best_choice
from spectheory.recommendation import Recommendation

__all__ = [
    "HFComparison",
    "BenchReport",
    "BatchSweep",
    "BenchDocument",
    "TreeCall",
    "TreeChoice",
    "TreeBench",
    "PolicyTemperature",
    "PolicyBench",
    "SettingForecast",
    "CrossForecast",
    "CrossAudit",
    "CrossVocabularyBench",
    "ProfileDocument",
    "AlphaDocument",
    "SpecBenchAlphaDocument",
    "LenienceDocument",
    "BlockwiseDocument",
    "RealModelCell",
    "RealModelDocument",
]

_BY_TEMPERATURE = ("autoregressive_seconds", "alpha", "profiles", "autoregressive")


@dataclass(frozen=True, kw_only=True)
class HFComparison(ResultRow):
    """Our loops against transformers' ``generate`` on the same networks (``decoders.bench.hf_compare``): the gamma of
    assisted generation, whether our native TinyGPTs ran too, the keywords that assisted it and the padded call widths
    (each absent before it was kept) and an ``HFComparisonRow`` per temperature."""

    gamma: int
    native: bool
    assisted: list | None = None  # None in comparisons made before they were kept
    padded_widths: dict | None = None
    rows: tuple  # of HFComparisonRow

    OPTIONAL = ("assisted", "padded_widths")

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> HFComparison:
        return cls(**dict(saved, rows=tuple(map(HFComparisonRow.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class BenchReport:
    """What ``bench_pair`` measured; ``rows`` hold one ``BenchRow`` per (temperature, gamma), dicts in ``as_dict``.
    Maps by temperature are keyed by float."""

    environment: dict
    settings: dict
    target: str
    draft: str
    c: float
    target_call_seconds: float
    draft_call_seconds: float
    autoregressive_seconds: dict  # temperature -> median seconds for the whole prompt set
    alpha: dict  # temperature -> pooled alpha from acceptance counts
    rows: tuple = ()
    profiles: dict = field(default_factory=dict)  # temperature -> the cost profile measured beside the rows
    autoregressive: dict = field(default_factory=dict)  # temperature -> seconds per token, over a call, efficiency

    def rows_at(self, temperature: float) -> list:
        """The rows at ``temperature``, in the sweep's order of gamma."""
        return [row for row in self.rows if row.temperature == temperature]

    def best(self, temperature: float) -> BenchRow:
        """The row with the largest measured speedup at ``temperature`` (ties: the smallest gamma)."""
        return best_choice(self.rows_at(temperature), lambda row: row.speedup, lambda row: row.gamma)

    def as_dict(self) -> dict:
        return dict(
            asdict(self),
            rows=[row.as_dict() for row in self.rows],
            best={str(t): self.best(t).as_dict() for t in self.autoregressive_seconds},
        )

    @classmethod
    def from_dict(cls, saved: dict) -> BenchReport:
        own = {f.name for f in fields(cls)} - {"rows", *_BY_TEMPERATURE}
        return cls(
            **{key: value for key, value in saved.items() if key in own},
            **{key: by_temperature(saved[key]) for key in _BY_TEMPERATURE if key in saved},
            rows=tuple(map(BenchRow.from_dict, saved["rows"])),
        )


@dataclass(frozen=True, kw_only=True)
class BatchSweep(ResultRow):
    """The batch sweep (``decoders.bench.bench.bench_batches``): at each of ``batch_sizes`` and ``gammas`` a
    ``BenchRow`` with its batch size, prompts and tokens per second, and the cost profile measured at each batch size
    and temperature (keyed "b,T")."""

    batch_sizes: list
    gammas: list
    rows: tuple  # of BenchRow
    profiles: dict

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> BatchSweep:
        return cls(**dict(saved, rows=tuple(map(BenchRow.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class BenchDocument:
    """`spectheory bench`'s document on our decoders (``decoders.bench.runs.bench_document``): the sweep
    (``BenchReport``, its keys first in the file), the text or task its prompts came from and their ids, the sweep's
    seconds, the padded call widths and decode paths of both models; the forecast made first with its judgement per
    temperature, the recommendation per temperature ("0.0", "1.0"), and where asked the batch sweep and the comparison
    with Hugging Face. Keys a vintage lacked read as None (the forecast, batches and comparison stay out of the file
    where not measured)."""

    bench: BenchReport
    text: str | None = None
    task: str | None = None
    sweep_seconds: float | None = None
    prompt_ids: list | None = None
    padded_widths: dict | None = None
    decode_paths: dict | None = None
    forecast: SweepForecast | None = None
    judged: tuple = ()  # of Judgement, one per temperature of the forecast
    recommendations: dict | None = None  # temperature ("0.0") -> Recommendation; None before the rule
    batches: BatchSweep | None = None
    hf: HFComparison | None = None

    def as_dict(self) -> dict:
        document = dict(
            self.bench.as_dict(),
            text=self.text,
            task=self.task,
            sweep_seconds=self.sweep_seconds,
            prompt_ids=self.prompt_ids,
            padded_widths=self.padded_widths,
            decode_paths=self.decode_paths,
        )
        if self.forecast is not None:
            document["forecast"] = dict(self.forecast.as_dict(), judged=[one.as_dict() for one in self.judged])
        if self.recommendations is not None:
            document["recommendations"] = {t: chosen.as_dict() for t, chosen in self.recommendations.items()}
        if self.batches is not None:
            document["batches"] = self.batches.as_dict()
        if self.hf is not None:
            document["hf"] = self.hf.as_dict()
        return document

    @classmethod
    def from_dict(cls, saved: dict) -> BenchDocument:
        forecast, chosen, batches, hf = (saved.get(key) for key in ("forecast", "recommendations", "batches", "hf"))
        beside = ("text", "task", "sweep_seconds", "prompt_ids", "padded_widths", "decode_paths")
        return cls(
            bench=BenchReport.from_dict(saved),
            **{key: saved.get(key) for key in beside},
            forecast=None if forecast is None else SweepForecast.from_dict(forecast),
            judged=tuple(map(Judgement.from_dict, (forecast or {}).get("judged", []))),
            recommendations=None if chosen is None else {t: Recommendation.from_dict(c) for t, c in chosen.items()},
            batches=None if batches is None else BatchSweep.from_dict(batches),
            hf=None if hf is None else HFComparison.from_dict(hf),
        )


@dataclass(frozen=True, kw_only=True)
class TreeCall(ResultRow):
    """One verify call of a tree of ``width`` positions against one chain call of the same width, timed interleaved
    (medians): the attention mask's cost."""

    width: int
    tree_call_seconds: float
    chain_call_seconds: float
    tree_over_chain_call: float


@dataclass(frozen=True, kw_only=True)
class TreeChoice(ResultRow):
    """The fastest candidate measured: its ``kind`` (chain, tree or dynamic), node ``budget``, shape and speedup."""

    kind: str
    budget: int
    tree: dict  # spectheory.trees.Tree.as_dict, or the dynamic tree's shape
    speedup: float


@dataclass(frozen=True, kw_only=True)
class TreeBench(ResultRow):
    """Tree against chain at equal node budgets, T = 0, batch 1 (``decoders.bench.tree_bench.bench_trees``): the
    rank frequencies along the decoded and the held-out text, the autoregressive baseline's timing, one ``TreeRow``
    per candidate, the one-call timings, EAGLE-2's forecast where dynamic trees ran, and the fastest. ``text`` and
    ``task``: the bench command's prompts (absent from the report's; a task of None is left out)."""

    target: str
    draft: str
    temperature: float
    verifier: str
    batch_size: int
    environment: dict
    settings: dict
    rank_frequencies: dict  # "decoding" and "held_out_text": a_1..a_k
    autoregressive: dict  # plumbing.timing.Timing.as_dict with seconds_per_token
    rows: tuple  # of TreeRow
    tree_calls: tuple  # of TreeCall
    dynamic_forecast: DynamicForecast | None = None  # where dynamic trees ran
    seconds: float | None = None  # None in files written before the bench was timed whole
    recommendation: TreeChoice
    text: str | None = None
    task: str | None = None

    OPTIONAL = ("text", "task")

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            rows=[row.as_dict() for row in self.rows],
            tree_calls=[call.as_dict() for call in self.tree_calls],
            dynamic_forecast=None if self.dynamic_forecast is None else self.dynamic_forecast.as_dict(),
            recommendation=self.recommendation.as_dict(),
        )

    @classmethod
    def from_dict(cls, saved: dict) -> TreeBench:
        forecast = saved.get("dynamic_forecast")
        return cls(
            **dict(
                saved,
                rows=tuple(map(TreeRow.from_dict, saved["rows"])),
                tree_calls=tuple(map(TreeCall.from_dict, saved["tree_calls"])),
                dynamic_forecast=None if forecast is None else DynamicForecast.from_dict(forecast),
                recommendation=TreeChoice.from_dict(saved["recommendation"]),
            )
        )


@dataclass(frozen=True, kw_only=True)
class PolicyTemperature(ResultRow):
    """The policies at one temperature: the autoregressive baseline's seconds, one ``PolicyRow`` per decoder (fixed
    gammas and policies), the best fixed gamma, the replay's cost profile and draws, and where a policy ran the best
    one with its gain over the best fixed gamma (each repeat's ratio: [min, median, max]) and whether to use it (every
    repeat's ratio above 1)."""

    temperature: float
    autoregressive_seconds: float
    rows: tuple  # of PolicyRow
    best_fixed: str
    profile: dict | None = None  # spectheory.costs.CostProfile.as_dict; None in files written before the replay
    replay_draws: int | None = None
    best_policy: str | None = None
    gain_over_best_fixed: float | None = None
    gain_spread: list | None = None
    use_policy: bool | None = None

    OPTIONAL = ("best_policy", "gain_over_best_fixed", "gain_spread", "use_policy")  # only where a policy ran

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> PolicyTemperature:
        return cls(**dict(saved, rows=tuple(map(PolicyRow.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class PolicyBench(ResultRow):
    """Draft-length policies against the fixed gammas at batch 1 (``decoders.bench.policy_bench.bench_policies``): one
    ``PolicyTemperature`` per temperature and the first one's cost profile. ``text`` and ``task``: the bench
    command's prompts (absent from the report's; a task of None is left out)."""

    target: str
    draft: str
    batch_size: int
    environment: dict
    settings: dict
    temperatures: tuple  # of PolicyTemperature
    profile: dict | None = None  # the first temperature's (None where no temperature ran)
    text: str | None = None
    task: str | None = None

    OPTIONAL = ("profile", "text", "task")

    def as_dict(self) -> dict:
        return dict(super().as_dict(), temperatures=[block.as_dict() for block in self.temperatures])

    @classmethod
    def from_dict(cls, saved: dict) -> PolicyBench:
        return cls(**dict(saved, temperatures=tuple(map(PolicyTemperature.from_dict, saved["temperatures"]))))


@dataclass(frozen=True, kw_only=True)
class SettingForecast(ResultRow):
    """One setting's cross-vocabulary forecast along the other prompts: alpha (None where nothing was proposed), rho
    (candidates per draft call), c, the widths its verify calls took ({k: iterations}), the speedup (None where the
    costs' checks withheld it, ``unchecked_speedup`` beside it), its jackknife standard error and stated interval.
    Fields a vintage lacked read as None."""

    alpha: float | None
    rho: float
    c: float | None = None
    widths: dict | None = None
    speedup: float | None
    unchecked_speedup: float | None = None
    standard_error: float | None = None
    interval: list | None = None


@dataclass(frozen=True, kw_only=True)
class CrossForecast(ResultRow):
    """The cross-vocabulary forecast at one temperature (``decoders.bench.cross_bench``): the draft's c, the prompts
    it read, the target's t_step and t_verify(k) at every width, the checks of those costs with the line that
    withholds every setting's forecast where they fail, and one ``SettingForecast`` per setting."""

    c: float
    prompts: int
    t_step: float | None = None  # None in files written before the widths were priced
    t_verify: list | None = None
    checks: CostChecks | None = None
    withheld: str | None = None
    by_setting: dict  # setting name -> SettingForecast

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            checks=None if self.checks is None else self.checks.as_dict(),
            by_setting={name: setting.as_dict() for name, setting in self.by_setting.items()},
        )

    @classmethod
    def from_dict(cls, saved: dict) -> CrossForecast:
        checks = saved.get("checks")
        return cls(
            **dict(
                saved,
                checks=None if checks is None else CostChecks.from_dict(checks),
                by_setting={name: SettingForecast.from_dict(one) for name, one in saved["by_setting"].items()},
            )
        )


@dataclass(frozen=True, kw_only=True)
class CrossAudit(AuditVerdict):
    """The cross-vocabulary report's audit of one method at T = 1: the decoder audited, in words, and its verdict."""

    decoder: str

    def as_dict(self) -> dict:
        verdict = super().as_dict()
        return {"decoder": verdict.pop("decoder"), **verdict}


@dataclass(frozen=True, kw_only=True)
class CrossVocabularyBench(ResultRow):
    """A draft of another tokenizer drafting for the target with each cross-vocabulary method
    (``decoders.bench.cross_bench.cross_vocabulary_document``): the two vocabularies' sizes, the forecast per
    temperature (``CrossForecast``, keyed "0", "1"), our autoregressive decoding's seconds per temperature, a
    ``CrossVocabularyRow`` per (temperature, method, gamma); where asked, the same-tokenizer drafts timed beside
    (``beside``, ``beside_rows``) and transformers' runs (``hf``); in the report, each method's audit."""

    target: str
    draft: str
    methods: list
    beside: list | None = None
    vocabularies: dict  # "target", "draft": sizes
    text: str
    settings: dict
    environment: dict
    forecast: dict  # temperature ("0", "1") -> CrossForecast
    autoregressive: dict  # temperature -> seconds, spread, tokens per second
    rows: tuple  # of CrossVocabularyRow
    beside_rows: tuple | None = None  # of CrossVocabularyRow
    hf: tuple | None = None  # of TransformersRow
    seconds: float
    audits: dict | None = None  # method -> CrossAudit (the report's)

    OPTIONAL = ("beside", "beside_rows", "hf", "audits")

    def as_dict(self) -> dict:
        typed = {
            "forecast": {t: forecast.as_dict() for t, forecast in self.forecast.items()},
            "rows": [row.as_dict() for row in self.rows],
            "beside_rows": None if self.beside_rows is None else [row.as_dict() for row in self.beside_rows],
            "hf": None if self.hf is None else [row.as_dict() for row in self.hf],
            "audits": None if self.audits is None else {m: audit.as_dict() for m, audit in self.audits.items()},
        }
        row = super().as_dict()
        return dict(row, **{key: value for key, value in typed.items() if key in row})

    @classmethod
    def from_dict(cls, saved: dict) -> CrossVocabularyBench:
        lists = {"rows": CrossVocabularyRow, "beside_rows": CrossVocabularyRow, "hf": TransformersRow}
        return cls(
            **dict(
                saved,
                forecast={t: CrossForecast.from_dict(one) for t, one in saved["forecast"].items()},
                audits=None
                if saved.get("audits") is None
                else {m: CrossAudit.from_dict(one) for m, one in saved["audits"].items()},
                **{key: tuple(map(kind.from_dict, saved[key])) for key, kind in lists.items() if key in saved},
            )
        )


@dataclass(frozen=True, kw_only=True)
class ProfileDocument(ResultRow):
    """A measured cost profile (docs/theory.md §10) as `spectheory profile --out` writes it and `gamma --costs`, `tree
    --costs` and `schedule` read it (``spectheory.costs.load_profile``): the pair, where and how it was measured, the
    ``CostProfile``, each component's spread over the repeats ({component: [min, median, max]}) and the checks it
    passed before anything forecasts from it (``decoders.bench.profile.profile_checks``)."""

    kind: str = PROFILE_KIND
    target: str
    draft: str
    environment: dict
    batch_size: int
    temperature: float
    text: str
    settings: dict  # decoders.bench.bench.BenchSettings.as_dict
    profile: CostProfile
    spread: dict
    checks: CostChecks | None = None  # None in profiles measured before the checks: absent from their files

    OPTIONAL = ("checks",)

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), profile=self.profile.as_dict())
        return shown if self.checks is None else dict(shown, checks=self.checks.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> ProfileDocument:
        checks = saved.get("checks")
        return cls(
            **dict(
                saved,
                profile=CostProfile.from_dict(saved["profile"]),
                checks=None if checks is None else CostChecks.from_dict(checks),
            )
        )


@dataclass(frozen=True, kw_only=True)
class AlphaDocument(ResultRow):
    """`spectheory alpha`'s document (Leviathan et al.'s Table 3 analogue, ``decoders.bench.runs.alpha_document``): the
    held-out text and its fingerprint, and an ``AlphaEstimate`` per draft and temperature."""

    corpus_fingerprint: str
    text: str | None
    estimates: tuple  # of AlphaEstimate

    def as_dict(self) -> dict:
        return dict(super().as_dict(), estimates=[one.as_dict() for one in self.estimates])

    @classmethod
    def from_dict(cls, saved: dict) -> AlphaDocument:
        return cls(**dict(saved, estimates=tuple(map(AlphaEstimate.from_dict, saved["estimates"]))))


@dataclass(frozen=True, kw_only=True)
class SpecBenchAlphaDocument(ResultRow):
    """`spectheory alpha --task spec-bench`'s document (``decoders.bench.runs.spec_bench_alpha_document``): the task,
    target, the prompt room and new tokens of each question, the questions per category as recorded, and a
    ``CategoryAlpha`` per category, draft and temperature."""

    task: str
    target: str
    prompt_room: int
    max_new_tokens: int
    prompts: dict  # category -> [question, tokens, cut]
    estimates: tuple  # of CategoryAlpha

    def as_dict(self) -> dict:
        return dict(super().as_dict(), estimates=[one.as_dict() for one in self.estimates])

    @classmethod
    def from_dict(cls, saved: dict) -> SpecBenchAlphaDocument:
        return cls(**dict(saved, estimates=tuple(map(CategoryAlpha.from_dict, saved["estimates"]))))


@dataclass(frozen=True, kw_only=True)
class LenienceDocument(ResultRow):
    """Leviathan et al.'s Table 5 analogue (``decoders.bench.runs.lenience_document``): the held-out text's
    fingerprint, the windows, and a ``LenienceRow`` per shipped draft."""

    corpus_fingerprint: str
    windows: int
    rows: tuple  # of LenienceRow

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> LenienceDocument:
        return cls(**dict(saved, rows=tuple(map(LenienceRow.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class BlockwiseDocument(ResultRow):
    """Blockwise parallel decoding (Stern et al.'s Fig. 4 analogue, ``decoders.bench.bench.bench_blockwise``): where
    and how it was timed, the proposal heads, greedy autoregressive decoding's seconds and a ``BlockwiseRow`` per
    configuration."""

    environment: dict
    settings: dict
    heads: int
    autoregressive_seconds: float
    rows: tuple  # of BlockwiseRow

    def as_dict(self) -> dict:
        return dict(super().as_dict(), rows=[row.as_dict() for row in self.rows])

    @classmethod
    def from_dict(cls, saved: dict) -> BlockwiseDocument:
        return cls(**dict(saved, rows=tuple(map(BlockwiseRow.from_dict, saved["rows"]))))


@dataclass(frozen=True, kw_only=True)
class RealModelCell(ResultRow):
    """One (draft, task) of the real-model table: its gamma sweep (``BenchReport``) and, on the comparison's task,
    our loops against transformers' (``HFComparison``)."""

    draft: str
    task: str
    bench: BenchReport
    hf: HFComparison | None = None

    OPTIONAL = ("hf",)

    def as_dict(self) -> dict:
        shown = dict(super().as_dict(), bench=self.bench.as_dict())
        return shown if self.hf is None else dict(shown, hf=self.hf.as_dict())

    @classmethod
    def from_dict(cls, saved: dict) -> RealModelCell:
        hf = saved.get("hf")
        return cls(
            **dict(
                saved,
                bench=BenchReport.from_dict(saved["bench"]),
                hf=None if hf is None else HFComparison.from_dict(hf),
            )
        )


@dataclass(frozen=True, kw_only=True)
class RealModelDocument(ResultRow):
    """The real-model table (docs/theory.md §11, ``decoders.bench.runs.real_model_document``): the target, its held-out
    text and fingerprint, where and how it was timed, alpha along the text of every draft at each temperature
    (``LenienceRow`` at lenience 1, over ``windows`` windows) and a ``RealModelCell`` per (draft, task)."""

    target: str
    text: str | None
    corpus_fingerprint: str
    environment: dict
    settings: dict
    windows: int
    alpha_text: tuple  # of LenienceRow
    cells: tuple  # of RealModelCell

    def as_dict(self) -> dict:
        return dict(
            super().as_dict(),
            alpha_text=[row.as_dict() for row in self.alpha_text],
            cells=[cell.as_dict() for cell in self.cells],
        )

    @classmethod
    def from_dict(cls, saved: dict) -> RealModelDocument:
        return cls(
            **dict(
                saved,
                alpha_text=tuple(map(LenienceRow.from_dict, saved["alpha_text"])),
                cells=tuple(map(RealModelCell.from_dict, saved["cells"])),
            )
        )
