"""The bench's result rows, typed (docs/measuring.md, "The bench's rows"): one ``BenchRow`` per (temperature, gamma)
of a chain sweep, built by keyword where it is measured (``decoders.bench.bench.bench_row``) and turned into the
document's dict only at the JSON edge (``as_dict``); ``from_dict`` reads a committed row back, of any vintage.
Seconds are wall seconds for the whole prompt set, medians over repeats; spreads are [min, median, max] over
repeats; speedups are autoregressive seconds over speculative seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from decoders.results import ResultRow

__all__ = [
    "AlphaEstimate",
    "CategoryAlpha",
    "EngineWords",
    "LenienceRow",
    "BenchRow",
    "ForecastRow",
    "JudgedRow",
    "TreeRow",
    "PolicyRow",
    "TableRow",
    "DynamicTreeRow",
    "BlockwiseRow",
    "HFComparisonRow",
    "CrossVocabularyRow",
    "TransformersRow",
]

#: Fields a row holds only where they were added (T = 0 rows checked against greedy decoding, Theorem 3.8 beside a
#: sweep, a batch sweep's rows): absent from the document where unset, as they always were.
_ADDED = (
    "greedy_equal",
    "predicted_speedup",
    "measured_over_predicted",
    "predicted_from_tokens",
    "measured_over_predicted_from_tokens",
    "batch_size",
    "prompts",
    "autoregressive_tokens_per_second",
    "tokens_per_second",
    "autoregressive_efficiency",
)


@dataclass(frozen=True, kw_only=True)
class EngineWords(ResultRow):
    """Our runs' acceptance in the engines' words (``spectheory.metrics.EngineCounts``, docs/metrics.md): accepted
    over drafted tokens, tokens per target call with the bonus token, and the unconditional per-position rates
    P(draft i accepted), i = 1..gamma; None where nothing was drafted (or in files written before they were
    recorded)."""

    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position_acceptance_rate: list | None = None


@dataclass(frozen=True, kw_only=True)
class AlphaEstimate(EngineWords):
    """Alpha of one draft at one temperature (``decoders.bench.alpha``); standard errors are over windows (text) and
    binomial (counts); the counted runs in the engines' words beside."""

    draft: str
    temperature: float
    alpha_text: float
    alpha_text_standard_error: float
    text_positions: int
    proposal_coverage: float  # share of text positions where the draft proposes a token
    alpha_counts: float
    alpha_counts_standard_error: float
    accepted_tokens: int
    verified_tokens: int  # accepted + rejected draft tokens
    gamma: int
    generated_tokens: int

    def as_dict(self) -> dict:  # the engines' words last, as the files have them
        shown = super().as_dict()
        words = {name: shown.pop(name) for name in EngineWords.__dataclass_fields__}
        return shown | words


@dataclass(frozen=True, kw_only=True)
class CategoryAlpha(AlphaEstimate):
    """``AlphaEstimate`` in one Spec-Bench category (``alpha --task spec-bench``)."""

    category: str

    def as_dict(self) -> dict:
        shown = super().as_dict()
        return shown | {"category": shown.pop("category")}


@dataclass(frozen=True, kw_only=True)
class LenienceRow(ResultRow):
    """Alpha along held-out text of one draft at each lenience (Leviathan et al.'s Table 5;
    ``decoders.bench.alpha.alpha_under_lenience``), with standard errors over windows."""

    draft: str
    temperature: float
    leniences: list
    alpha: list
    standard_error: list


@dataclass(frozen=True, kw_only=True)
class BenchRow(ResultRow):
    """One (temperature, gamma) row of a sweep: what was measured, its spread and interval, the cost model's
    prediction (``calibrated_*``, docs/theory.md §10), the engines' acceptance numbers of our runs, and where added,
    greedy equality, Theorem 3.8 and the batch sweep's throughput."""

    temperature: float
    gamma: int
    seconds: float  # speculative decoding of the prompt set, median over repeats
    seconds_spread: list | None = None  # [min, median, max] over repeats
    iterations: int  # row iterations over every prompt
    tokens_per_iteration: float  # with the correction/bonus token
    accepted_tokens: int | None = None
    verified_tokens: int | None = None
    alpha_counts: float | None = None  # accepted / verified draft tokens (None: nothing verified)
    speedup: float  # median autoregressive seconds over median speculative seconds
    speedup_spread: list | None = None  # each repeat's ratio: [min, median, max]
    speedup_standard_error: float | None = None  # over the prompts (None where not computed, e.g. batches)
    speedup_interval: list | None = None  # 95% bootstrap interval over repeats and prompts
    calibrated_speedup: float | None = None  # the cost model's, from the profile measured beside the row
    calibrated_over_measured: float | None = None
    calibrated_within: bool | None = None  # within max(10%, 2 SE) of the measurement
    calibrated_tokens_per_iteration: float | None = None
    positional_tokens_per_iteration: float | None = None
    acceptance_rate: float | None = None  # the engines' numbers of our runs (docs/metrics.md); None: nothing drafted
    mean_acceptance_length: float | None = None
    per_position_acceptance_rate: list | None = None
    efficiency: float | None = None  # seconds inside the models' calls over the run's
    measured_seconds_per_iteration: dict | None = None  # draft, verify, other
    calibrated_seconds_per_iteration: dict | None = None  # draft, verify, other
    greedy_equal: list | None = None  # T = 0: each prompt's tokens equal to greedy autoregressive decoding's
    predicted_speedup: float | None = None  # Theorem 3.8 at the sweep's pooled alpha and c
    measured_over_predicted: float | None = None
    predicted_from_tokens: float | None = None  # the tokens-per-iteration form: tokens / (gamma c + 1)
    measured_over_predicted_from_tokens: float | None = None
    batch_size: int | None = None  # a batch sweep's rows
    prompts: int | None = None
    autoregressive_tokens_per_second: float | None = None
    tokens_per_second: float | None = None
    autoregressive_efficiency: float | None = None

    OPTIONAL: ClassVar[tuple] = _ADDED  # fields without a default are those of every row since the first sweeps


@dataclass(frozen=True, kw_only=True)
class ForecastRow(ResultRow):
    """A forecast's speedup at one gamma (``decoders.bench.forecast.sweep.forecast_speedups``): the cost profile's
    speedup with the acceptance of every prompt decoded, its jackknife standard error over the prompts (None for one
    prompt) and its stated 95% interval (``spectheory.intervals.forecast_interval``)."""

    gamma: int
    speedup: float
    standard_error: float | None
    interval: list | None = None  # [low, high]; None in files written before intervals were stated


@dataclass(frozen=True, kw_only=True)
class JudgedRow(ResultRow):
    """A forecast held against the sweep at one gamma (``decoders.bench.forecast.sweep.judge_forecast``): both speedups,
    their ratio, whether the forecast lies in the measured 95% interval, and whether the measurement lies in the
    forecast's interval combined with its own (``covered``, ``spectheory.intervals.covers``)."""

    gamma: int
    forecast: float
    measured: float
    forecast_standard_error: float | None
    forecast_over_measured: float
    measured_interval: list | None
    inside_interval: bool | None
    covered: bool | None = None  # None in files written before coverage was judged


@dataclass(frozen=True, kw_only=True)
class TreeRow(ResultRow):
    """One candidate of the tree-against-chain bench (``decoders.bench.tree_bench``) at T = 0, batch 1: a chain, the
    optimal static tree or EAGLE-2's dynamic tree at a node ``budget``; what it measured, and where they apply the
    rank model's and the replay's predictions (static shapes) and the dynamic forecast (dynamic trees). Fields a
    candidate has no value for are None; they are in the document all the same."""

    kind: str  # "chain", "tree" or "dynamic"
    budget: int  # nodes per call, the root included
    tree: dict  # spectheory.trees.Tree.as_dict, or the dynamic tree's shape
    iterations: int | None = None  # None in files written before it was counted
    tokens_per_call: float  # with the bonus token
    mean_acceptance_length: float | None = None  # the engines' name of the same number (docs/metrics.md)
    acceptance_rate: float | None = None
    seconds: float  # the prompt set, median over repeats
    seconds_spread: list  # [min, max] over repeats
    speedup: float  # autoregressive over this, median of the repeats' ratios
    speedup_spread: list  # [min, median, max]
    prefill_seconds: float | None = None  # the costs measured beside the timings
    seconds_per_iteration: float | None = None
    predicted_tokens_per_call: float | None = None  # the rank model on the decoded text's rank frequencies
    predicted_tokens_per_call_held_out: float | None = None  # the same from held-out text
    tokens_over_predicted: float | None = None
    rank_model_speedup: float | None = None
    replayed_iterations: int | None = None  # the replay of the greedy ranks along the continuations
    calibrated_speedup: float | None = None
    calibrated_over_measured: float | None = None
    forecast_tokens_per_call: float | None = None  # a dynamic tree's forecast (decoders.bench.forecast.dynamic)
    forecast_speedup: float | None = None
    tokens_forecast_over_measured: float | None = None
    forecast_over_measured: float | None = None
    calibrated_tokens_per_call: float | None = None


@dataclass(frozen=True, kw_only=True)
class PolicyRow(ResultRow):
    """One decoder of the draft-length policy bench (``decoders.bench.policy_bench``): a fixed gamma or a policy,
    what it measured, the engines' acceptance numbers of its runs, and the replay's prediction under the costs
    measured beside it (docs/theory.md §13). Per token means per emitted token."""

    decoder: str  # "fixed-G" or the policy's name
    tokens_per_call: float
    drafted_per_token: float
    wasted_per_token: float  # drafted but rejected
    mean_proposed: float  # drafts per iteration
    seconds: float
    speedup: float
    speedup_spread: list  # [min, median, max] over repeats
    acceptance_rate: float | None = None  # None in files written before the engines' numbers were added
    mean_acceptance_length: float | None = None
    per_position_acceptance_rate: list | None = None
    policy: str  # the rule, described
    predicted_tokens_per_call: float | None = None  # the replay's
    predicted_speedup: float | None = None
    tokens_over_predicted: float | None = None
    predicted_over_measured: float | None = None


@dataclass(frozen=True, kw_only=True)
class TableRow(ResultRow):
    """One (category, draft) line of Spec-Bench's table (``decoders.bench.spec_bench.table``): the category's
    prompts, and of the draft's best setting at T = 0 (our decoders' over our autoregressive decoder, an engine's
    over its own plain decoding) the mean accepted tokens per call, alpha, the measured speedup with its spread, the
    cost model's prediction, the forecast's where one was made, and whether every prompt's greedy tokens equal
    autoregressive decoding's."""

    category: str
    label: str
    draft: str
    prompts: int
    cut: int  # prompts whose front was cut to fit the draft's context
    prompt_tokens: float  # mean
    setting: str  # "gamma G" or "N nodes"
    gamma: int | None
    mean_acceptance_length: float
    acceptance_rate: float | None = None
    alpha: float | None
    speedup: float
    speedup_spread: list  # [min, median, max] over repeats
    calibrated_speedup: float | None
    calibrated_over_measured: float | None
    forecast_speedup: float | None = None
    greedy_equal: bool


@dataclass(frozen=True, kw_only=True)
class DynamicTreeRow(ResultRow):
    """EAGLE-2's dynamic tree in one Spec-Bench category (``decoders.bench.spec_bench.suite``), at T = 0: its speedup
    over our autoregressive decoder with the spread over repeats, tokens per target call and the acceptance of its
    nodes, and greedy equality per prompt. The bench row's keys, where the tree has them: no gamma, no alpha from
    counts, no cost model."""

    temperature: float
    gamma: None = None  # a tree has nodes, not a draft length
    nodes: int  # the tree's budget
    speedup: float
    speedup_spread: list  # [min, median, max]
    mean_acceptance_length: float  # tokens per target call
    acceptance_rate: float  # accepted over drafted nodes
    alpha_counts: None = None
    calibrated_speedup: None = None
    calibrated_over_measured: None = None
    greedy_equal: list  # per prompt


@dataclass(frozen=True, kw_only=True)
class BlockwiseRow(ResultRow):
    """One ``BlockwiseConfig`` of the blockwise bench (``decoders.bench.bench.bench_blockwise``, Stern et al.): its
    criterion and block sizes, the seconds of the prompt set, the mean accepted block (tokens per model call) and the
    speedup over greedy autoregressive decoding with the base model."""

    criterion: str
    top_k: int
    epsilon: float
    min_block_size: int
    block_size: int  # the heads used (the config's, or every head)
    seconds: float
    iterations: int
    mean_block_size: float
    speedup: float


@dataclass(frozen=True, kw_only=True)
class HFComparisonRow(ResultRow):
    """One temperature of our loops against transformers' ``generate`` (``decoders.bench.hf_compare``): per runner
    (``ar_hf_generate``, ``speculative_hf_assisted``, ``ar_ours_adapter``, ``speculative_ours_native``, ...) its
    seconds for the prompt set (median over repeats) and [min, max]; per runner of ours, transformers' seconds over
    its own (``over_hf``: above 1, ours is faster) and that ratio's [min, max] over repeats; at T = 0 whether every
    runner's tokens equal ``generate``'s. The document keeps them flat, as it always did: ``<runner>_seconds``,
    ``<runner>_seconds_spread``, ``<runner>_over_hf``, ``<runner>_over_hf_spread``."""

    temperature: float
    seconds: dict  # runner -> median seconds
    seconds_spread: dict  # runner -> [min, max]
    over_hf: dict  # our runner -> transformers' median seconds over ours
    over_hf_spread: dict  # our runner -> [min, max] of the per-repeat ratio
    greedy_outputs_agree: bool | None = None  # T = 0 only

    _SUFFIXES: ClassVar[tuple] = (  # longest first: "_seconds_spread" ends in neither "_seconds" nor "_over_hf"
        ("_seconds_spread", "seconds_spread"),
        ("_over_hf_spread", "over_hf_spread"),
        ("_seconds", "seconds"),
        ("_over_hf", "over_hf"),
    )

    def ours_over_hf(self, kind: str) -> tuple | None:
        """(ratio, [min, max]) of our adapter's ``kind`` ("ar" or "speculative") against transformers'; None where
        that kind did not run (no assisted generation for the draft)."""
        name = f"{kind}_ours_adapter"
        return (self.over_hf[name], self.over_hf_spread[name]) if name in self.over_hf else None

    def as_dict(self) -> dict:
        row = {"temperature": self.temperature}
        for suffix, field in self._SUFFIXES:
            row.update({runner + suffix: value for runner, value in getattr(self, field).items()})
        if self.greedy_outputs_agree is not None:
            row["greedy_outputs_agree"] = self.greedy_outputs_agree
        return row

    @classmethod
    def from_dict(cls, row: dict) -> "HFComparisonRow":
        parts = {field: {} for _, field in cls._SUFFIXES}
        for key, value in row.items():
            if key in ("temperature", "greedy_outputs_agree"):
                continue
            suffix, field = next(((s, f) for s, f in cls._SUFFIXES if key.endswith(s)), (None, None))
            if suffix is None:
                raise TypeError(f"HFComparisonRow: unknown key {key!r}")
            parts[field][key.removesuffix(suffix)] = value
        return cls(temperature=row["temperature"], greedy_outputs_agree=row.get("greedy_outputs_agree"), **parts)


@dataclass(frozen=True, kw_only=True)
class CrossVocabularyRow(ResultRow):
    """One (temperature, method, gamma) of a draft with another tokenizer (``decoders.bench.cross_bench``): seconds
    for the prompt set (median, [min, median, max] over repeats), the speedup over our autoregressive decoding of the
    target, target and draft calls, target tokens per target call, alpha (accepted over proposed target candidates;
    ``slrs``: characters), rho (candidates per draft call), greedy equality at T = 0 and the forecast made first. A
    same-tokenizer draft timed beside them names itself in ``draft``, its method ``speculative``."""

    method: str
    temperature: float
    gamma: int
    seconds: float
    seconds_spread: list
    speedup: float
    speedup_spread: list
    target_calls: int
    draft_calls: int
    tokens_per_call: float
    alpha: float | None
    candidates_per_draft_token: float
    greedy_equal: bool | None = None
    forecast_speedup: float | None = None
    draft: str | None = None  # a same-tokenizer draft's name; None: the document's draft of another tokenizer
    forecast_interval: list | None = None  # its stated 95% interval (the prompts' jackknife and the run error)

    OPTIONAL: ClassVar[tuple] = ("draft", "forecast_interval")


@dataclass(frozen=True, kw_only=True)
class TransformersRow(ResultRow):
    """transformers beside a cross-vocabulary bench (``--hf``): its plain ``generate`` (``gamma`` None) or its
    assisted generation with the draft and both tokenizers at ``gamma`` assistant tokens; seconds for the prompt set,
    the speedup over our autoregressive decoding timed with it, and at T = 0 whether its tokens equal ours."""

    temperature: float
    gamma: int | None
    seconds: float
    seconds_spread: list
    speedup: float
    greedy_equal: bool | None = None
