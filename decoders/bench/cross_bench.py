"""A draft with another tokenizer measured (docs/commands.md, "What does a draft with another tokenizer buy me?";
docs/theory-vocabularies.md §15): per temperature, cross-vocabulary method and gamma, our
``generate_cross_vocabulary`` against our autoregressive decoder of the target on the same held-out prompts, timed
interleaved, with the acceptance of the target candidates, the candidates per draft token (the tokenization ratio
rho), target tokens per call, greedy equality, and a forecast made first from other prompts: tokens per target call
and the verify calls' widths counted along them, priced by the one cost model (``spectheory.costs.forecast_speedup``:
the target's calls timed at every width, the draft's from its own autoregressive decoding of them), its costs checked
before it is given (``spectheory.cost_checks``). Drafts that read the target's own tokens (``beside``) are timed in
the same interleaved run by our speculative decoding at every gamma, forecast the same way (their draft calls from
the draft phase of profiled runs), so that the answer is held against what
the target's own tokenizer buys."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from decoders.autoregressive import generate_autoregressive
from decoders.bench.bench import BenchSettings, environment
from decoders.bench.documents import CrossForecast, CrossVocabularyBench, SettingForecast
from decoders.bench.inputs import load_inputs
from decoders.bench.profile import verify_widths_job
from decoders.bench.prompts import draw_prompts
from decoders.bench.rows import CrossVocabularyRow, TransformersRow
from decoders.bench.runs import BenchRun
from decoders.cross_vocabulary import CrossVocabularyConfig, generate_cross_vocabulary, window
from decoders.drafts import open_draft
from decoders.models.corpus import character_tokenizer
from decoders.models.hf_generate import assisted_options, hf_generate
from decoders.models.protocol import synchronize
from decoders.progress import progress_bar
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.vocabulary import TokenizerVocabulary, vocabulary_of
from plumbing.timing import time_interleaved
from spectheory.cost_checks import check_costs
from spectheory.costs import forecast_speedup, width_priced
from spectheory.intervals import forecast_interval, jackknife_error, leave_one_out

__all__ = ["pair_vocabularies", "cross_vocabulary_document", "SAME_TOKENIZER"]

#: The method a same-tokenizer draft's rows name (``beside``): standard speculative sampling, one target candidate
#: per draft token.
SAME_TOKENIZER = "speculative"


def pair_vocabularies(target_tokenizer, draft_tokenizer) -> tuple:
    """(target's, draft's) vocabularies as the cross-vocabulary decoders read them (``decoders.vocabulary``); a draft
    that reads the target's own tokens is refused (it needs no cross-vocabulary method)."""
    target = vocabulary_of(target_tokenizer)
    draft = vocabulary_of(draft_tokenizer, byte_level=isinstance(target, TokenizerVocabulary))
    if target.pieces == draft.pieces:
        raise ValueError("the draft reads the target's own tokens: bench it without --cross-vocabulary")
    return target, draft


@dataclass(frozen=True)
class _Counts:
    """Accepted and proposed candidates, target and draft calls, and new tokens of generations, summed."""

    accepted: int
    proposed: int
    target_calls: int
    draft_calls: int
    tokens: int

    @classmethod
    def of(cls, generations: list) -> _Counts:
        """The counts of ``generations`` (``decoders.results.Generation``) together."""
        stats = [g.stats for g in generations]
        return cls(
            accepted=sum(n for one in stats for row in one.accepted_per_iteration for n in row),
            proposed=sum(n for one in stats for row in one.proposed_per_iteration for n in row),
            target_calls=sum(one.target_calls for one in stats),
            draft_calls=sum(one.draft_calls for one in stats),
            tokens=sum(len(row) for g in generations for row in g.tokens),
        )

    @property
    def alpha(self) -> float | None:
        """Accepted over proposed candidates; None where none was proposed."""
        return self.accepted / self.proposed if self.proposed else None

    @property
    def rho(self) -> float:
        """Candidates per draft call (0 without draft calls)."""
        return self.proposed / self.draft_calls if self.draft_calls else 0.0


@dataclass(frozen=True)
class _Setting:
    """One timed decoder of the sweep: a cross-vocabulary ``method`` with the draft of another tokenizer
    (``draft`` None), or our speculative decoding with the same-tokenizer draft ``draft``; ``decode(prompt, seed)``,
    and for the latter ``profiled(prompt, seed)``, the same run with its phases timed (its forecast's c)."""

    method: str
    gamma: int
    draft: str | None
    decode: Callable
    profiled: Callable | None = None


def _settings(pair, beside: dict, methods, settings: BenchSettings, sampling: Sampling) -> dict[str, _Setting]:
    """``{name: _Setting}``: every (method, gamma) of the draft with another tokenizer, then every (same-tokenizer
    draft, gamma)."""
    tokens = settings.max_new_tokens
    crossed = {
        f"{m} {g}": _Setting(
            m, g, None, partial(_decode, pair, config=CrossVocabularyConfig(m, g, sampling), tokens=tokens)
        )
        for m in methods
        for g in settings.gammas
    }
    same = {}
    for name, model in beside.items():
        for g in settings.gammas:
            speculate = partial(_speculate, (pair[0], model), config=SpeculativeConfig(g, sampling), tokens=tokens)
            same[f"beside {name} {g}"] = _Setting(SAME_TOKENIZER, g, name, speculate, partial(speculate, profile=True))
    return crossed | same


def _decoding_seconds(model, prompts: list, tokens: int, sampling: Sampling) -> float:
    """Seconds of ``model``'s own autoregressive decoding of ``tokens`` new tokens after each of ``prompts`` (one
    timed run)."""
    start = time.perf_counter()
    for row in prompts:
        generate_autoregressive(model, [row], max_new_tokens=tokens, sampling=sampling, randomness=seeded(0))
    synchronize(model.device)
    return time.perf_counter() - start


def _forecast(pair, prompts, setups: dict, settings, sampling, draft_prompts) -> CrossForecast:
    """Per setting (``_settings``): alpha, rho and the widths its verify calls took along ``prompts`` (untimed), and
    the speedup they forecast through the one cost model (``spectheory.costs.forecast_speedup``): tokens per target
    call counted along the text; the verify call priced by those widths, t_step times t_verify(k) / t_verify(1) from
    the target's calls at every width timed round-robin (``verify_widths_job``; a call of 2-9 positions costs
    1.4-1.8 steps on a CPU); the draft's calls at c t_step, c the draft's seconds per token in its own decoding of
    ``prompts`` over the target's (one timed run each), or, for a same-tokenizer draft, the draft phase of the
    setting's profiled runs; its standard error the jackknife's over the prompts, which its stated interval carries
    with the run error (``spectheory.intervals.forecast_interval``). The widths' costs are checked
    (``spectheory.cost_checks``) before any forecast is given: where they fail, every setting's forecast is withheld
    (None) with the line."""
    target, draft, vocabularies = pair
    tokens = settings.max_new_tokens
    draft_prompts = [window(row, draft, tokens) for row in draft_prompts]
    target_seconds = _decoding_seconds(target, prompts, tokens, sampling)
    t_step = target_seconds / (len(prompts) * tokens)
    c = _decoding_seconds(draft, draft_prompts, tokens, sampling) / target_seconds
    generations = {
        name: [(setting.profiled or setting.decode)(row, i) for i, row in enumerate(prompts)]
        for name, setting in setups.items()
    }
    widths = {name: _widths(runs) for name, runs in generations.items()}
    t_verify, spread = _verify_calls(target, prompts[0], sampling, max(max(w) for w in widths.values()), settings)
    checks = check_costs(t_step, t_verify, spread=spread)
    by_setting = {}
    for name, setting in setups.items():
        runs = generations[name]
        counts = _Counts.of(runs)
        cost = c
        if setting.profiled is not None:  # the draft phase's seconds per draft call, over t_step
            cost = sum(g.stats.seconds["draft"] for g in runs) / max(counts.draft_calls, 1) / t_step
        predicted = _predicted(runs, t_step, t_verify, cost)
        error = jackknife_error([_predicted(rest, t_step, t_verify, cost) for rest in leave_one_out(runs)])
        by_setting[name] = SettingForecast(
            alpha=counts.alpha,
            rho=counts.rho,
            c=cost,
            widths={str(k): f for k, f in sorted(widths[name].items())},
            speedup=predicted if checks.passed else None,
            unchecked_speedup=predicted,
            standard_error=error,
            interval=forecast_interval(predicted, error, len(runs)) if checks.passed else None,
        )
    return CrossForecast(
        c=c,
        prompts=len(prompts),
        t_step=t_step,
        t_verify=list(t_verify),
        checks=checks,
        withheld=checks.line("the cross-vocabulary forecast"),
        by_setting=by_setting,
    )


def _predicted(runs: list, t_step: float, t_verify: tuple, cost: float) -> float:
    """The forecast speedup of one setting's ``runs`` (``decoders.results.Generation``, one per prompt): their tokens
    per target call, their verify calls priced by the widths they fed the target, ``cost`` t_step per draft call."""
    counts = _Counts.of(runs)
    iterations = counts.target_calls
    return forecast_speedup(
        counts.tokens / iterations,
        t_step,
        t_step * width_priced(t_verify, _widths(runs)) / t_verify[0],
        counts.draft_calls / iterations * cost * t_step,
    )


def _widths(generations: list) -> Counter:
    """{k: iterations} over ``generations``' iterations, k the positions each verify call fed the target (the
    candidates it proposed, + 1)."""
    return Counter(max(proposed) + 1 for g in generations for proposed in g.stats.proposed_per_iteration)


def _verify_calls(target, prompt: list, sampling: Sampling, widest: int, settings: BenchSettings) -> tuple:
    """(t_verify(k) for k = 1..``widest``, each the median over ``settings``' repeats (after at least one warm-up) of
    the median of 4 round-robin rounds after ``prompt``; their spread {"t_verify_k": [min, median, max]})."""
    record = []
    job = verify_widths_job(target, torch.tensor([prompt]), sampling, range(1, widest + 1), record.append)
    warmup = max(settings.warmup, 1)  # a first call pays for its shapes: never timed
    for _ in range(warmup + settings.repeats):
        job()
    repeats = record[warmup:]
    values = {k: sorted(r[k] for r in repeats) for k in range(1, widest + 1)}
    spread = {f"t_verify_{k}": [v[0], statistics.median(v), v[-1]] for k, v in values.items()}
    return tuple(statistics.median(v) for v in values.values()), spread


def _decode(pair, prompt: list, seed: int, *, config: CrossVocabularyConfig, tokens: int):
    target, draft, (target_vocabulary, draft_vocabulary) = pair
    return generate_cross_vocabulary(
        target,
        draft,
        [prompt],
        target_vocabulary=target_vocabulary,
        draft_vocabulary=draft_vocabulary,
        max_new_tokens=tokens,
        config=config,
        randomness=seeded(seed),
    )


def _speculate(models: tuple, prompt: list, seed: int, *, config: SpeculativeConfig, tokens: int, profile=False):
    """Our speculative decoding of one prompt by ``models`` (target, same-tokenizer draft) on its seed."""
    target, draft = models
    return generate_speculative(
        target, draft, [prompt], max_new_tokens=tokens, config=config, randomness=seeded(seed), profile=profile
    )


def _spelled(vocabularies, prompts: list) -> list:
    """Each prompt in the draft's tokens (what its own autoregressive decoding starts from)."""
    target_vocabulary, draft_vocabulary = vocabularies
    return [list(draft_vocabulary.encode(target_vocabulary.decode(row))) for row in prompts]


def _transformers_runs(
    hf, prompts: list, settings: BenchSettings, sampling: Sampling, outputs: dict
) -> dict[str, Callable]:
    """transformers' runs beside ours (``--hf``): its plain ``generate`` of the target and its assisted generation
    with the draft and both tokenizers at each gamma (its own method across vocabularies), each prompt on its seed."""
    if hf is None:
        return {}
    tokens = settings.max_new_tokens

    def run(name, **assisted):
        def decode():
            outputs[name] = [
                hf_generate(hf.target, torch.tensor([row]), tokens, sampling, seeded(i), **assisted)
                for i, row in enumerate(prompts)
            ]

        return decode

    runs = {"hf generate": run("hf generate")}
    for gamma in settings.gammas:
        runs[f"hf assisted {gamma}"] = run(f"hf assisted {gamma}", **hf.assisted, assistant_tokens=gamma)
    return runs


@dataclass(frozen=True)
class _Sweep:
    """What every temperature of the sweep shares: the target, the prompts (target ids), the settings, transformers'
    counterparts (None without ``--hf``) and the progress bar."""

    target: object
    prompts: list
    settings: BenchSettings
    hf: _Transformers | None
    bar: object


@torch.inference_mode()
def _rows_at(sweep: _Sweep, setups: dict, sampling: Sampling, forecast: CrossForecast) -> tuple:
    """The rows of one temperature: every setting (``_settings``), the target's autoregressive decoding and, with
    ``sweep.hf``, transformers' runs (``_transformers_runs``), timed interleaved; each run decodes every prompt in turn
    on its own seed. -> (the cross-vocabulary rows, the same-tokenizer drafts' rows, transformers' rows, our
    autoregressive decoding's seconds and tokens per second)."""
    target, prompts, settings, bar = sweep.target, sweep.prompts, sweep.settings, sweep.bar
    tokens = settings.max_new_tokens
    outputs = {}

    def autoregressive():
        outputs["autoregressive"] = [
            generate_autoregressive(target, [row], max_new_tokens=tokens, sampling=sampling, randomness=seeded(i))
            for i, row in enumerate(prompts)
        ]

    def decoded(name):
        outputs[name] = [setups[name].decode(row, i) for i, row in enumerate(prompts)]

    runs = {"autoregressive": autoregressive, **{name: partial(decoded, name) for name in setups}}
    runs.update(_transformers_runs(sweep.hf, prompts, settings, sampling, outputs))
    timings = time_interleaved(
        runs,
        repeats=settings.repeats,
        warmup=settings.warmup,
        synchronize=lambda: synchronize(target.device),
        progress=lambda: bar.update(1),
    )
    baseline = timings["autoregressive"].seconds
    greedy_tokens = [g.tokens for g in outputs["autoregressive"]]
    rows = []
    for name, setting in setups.items():
        seconds = timings[name].seconds
        ratios = sorted(a / s for a, s in zip(baseline, seconds))
        counts = _Counts.of(outputs[name])
        rows.append(
            CrossVocabularyRow(
                method=setting.method,
                draft=setting.draft,
                temperature=sampling.temperature,
                gamma=setting.gamma,
                seconds=statistics.median(seconds),
                seconds_spread=_spread(seconds),
                speedup=statistics.median(baseline) / statistics.median(seconds),
                speedup_spread=[ratios[0], statistics.median(ratios), ratios[-1]],
                target_calls=counts.target_calls,
                draft_calls=counts.draft_calls,
                tokens_per_call=counts.tokens / counts.target_calls,
                alpha=counts.alpha,
                candidates_per_draft_token=counts.rho,
                greedy_equal=[g.tokens for g in outputs[name]] == greedy_tokens if sampling.greedy else None,
                forecast_speedup=forecast.by_setting[name].speedup,
                forecast_interval=forecast.by_setting[name].interval,
            )
        )
    ours = [g.tokens[0] for g in outputs["autoregressive"]]
    hf_rows = [
        TransformersRow(
            temperature=sampling.temperature,
            gamma=None if name == "hf generate" else int(name.split()[-1]),
            seconds=statistics.median(timings[name].seconds),
            seconds_spread=_spread(timings[name].seconds),
            speedup=statistics.median(baseline) / statistics.median(timings[name].seconds),
            greedy_equal=outputs[name] == ours if sampling.greedy else None,
        )
        for name in runs
        if name.startswith("hf ")
    ]
    autoregressive = {
        "seconds": statistics.median(baseline),
        "seconds_spread": _spread(baseline),
        "tokens_per_second": len(prompts) * tokens / statistics.median(baseline),
    }
    crossed = [row for row in rows if row.draft is None]
    return crossed, [row for row in rows if row.draft is not None], hf_rows, autoregressive


def _spread(seconds: list) -> list:
    return [min(seconds), statistics.median(seconds), max(seconds)]


def cross_vocabulary_document(run: BenchRun) -> CrossVocabularyBench:
    """The bench of ``run.draft`` (a draft with another tokenizer) drafting for ``run.target`` with each of
    ``run.cross_vocabulary``'s methods, and of each draft in ``run.beside`` (drafts that read the target's tokens) by
    our speculative decoding: the forecast from ``run.forecast_prompts`` other prompts first, then the timed sweep
    (module docstring) under ``run.settings``; with ``run.hf`` transformers' plain and assisted generation beside it
    (its draft converted to GPT-2 where it is a TinyGPT)."""
    draft, settings, methods, forecast_prompts = run.draft, run.settings, run.cross_vocabulary, run.forecast_prompts
    target, device, dtype, hf, progress = run.target, run.device, run.dtype, run.hf, run.progress
    started = time.perf_counter()
    inputs = load_inputs(target, [], text=run.text, device=device, dtype=dtype, compile="off")
    draft_model, draft_tokenizer = open_draft(
        draft, target=(inputs.target, inputs.tokenizer), device=device, dtype=dtype
    )
    vocabularies = pair_vocabularies(inputs.tokenizer, draft_tokenizer)
    same = _same_tokenizer_drafts(run.beside, inputs, vocabularies[0], device, dtype)
    pair = (inputs.target, draft_model, vocabularies)
    drawn = draw_prompts(
        inputs, None, (settings.prompts, settings.prompt_length), seed=settings.seed, forecast=forecast_prompts
    )
    prompts, others = drawn.sweep.tolist(), [] if drawn.forecast is None else drawn.forecast.tolist()
    transformers = _transformers(inputs, draft_model, draft_tokenizer, prompts, settings) if hf else None
    timed = (len(methods) + len(same)) * len(settings.gammas)
    per_temperature = 1 + timed + (1 + len(settings.gammas) if hf else 0)
    runs = len(settings.temperatures) * (settings.warmup + settings.repeats) * per_temperature
    rows, beside_rows, hf_rows, forecasts, autoregressive = [], [], [], {}, {}
    with progress_bar(progress, total=runs, desc="cross-vocabulary", unit="run") as bar:
        sweep = _Sweep(inputs.target, prompts, settings, transformers, bar)
        for temperature in settings.temperatures:
            sampling = Sampling(temperature)
            setups = _settings(pair, same, methods, settings, sampling)
            forecast = _forecast(pair, others, setups, settings, sampling, _spelled(vocabularies, others))
            forecasts[f"{temperature:g}"] = forecast
            crossed, alongside, theirs, autoregressive[f"{temperature:g}"] = _rows_at(sweep, setups, sampling, forecast)
            rows, beside_rows, hf_rows = rows + crossed, beside_rows + alongside, hf_rows + theirs
    return CrossVocabularyBench(
        target=target or "target",
        draft=draft,
        methods=list(methods),
        beside=list(same) if same else None,
        vocabularies={"target": vocabularies[0].size, "draft": vocabularies[1].size},
        text=inputs.text,
        settings={
            "gammas": list(settings.gammas),
            "temperatures": list(settings.temperatures),
            "prompts": settings.prompts,
            "prompt_length": settings.prompt_length,
            "max_new_tokens": settings.max_new_tokens,
            "repeats": settings.repeats,
            "warmup": settings.warmup,
            "seed": settings.seed,
            "batch_size": 1,
            "forecast_prompts": forecast_prompts,
        },
        environment=environment(device, dtype),
        forecast=forecasts,
        autoregressive=autoregressive,
        rows=tuple(rows),
        beside_rows=tuple(beside_rows) if same else None,
        hf=tuple(hf_rows) if hf else None,
        seconds=time.perf_counter() - started,
    )


def _same_tokenizer_drafts(names, inputs, target_vocabulary, device, dtype) -> dict[str, object]:
    """``{name: model}`` of the drafts to time beside the pair; one that reads another tokenizer than the target's
    is refused before any timing."""
    drafts = {}
    for name in names:
        model, tokenizer = open_draft(name, target=(inputs.target, inputs.tokenizer), device=device, dtype=dtype)
        same = tokenizer is inputs.tokenizer or (
            tokenizer is not None and vocabulary_of(tokenizer).pieces == target_vocabulary.pieces
        )
        if not same:
            raise ValueError(
                f"beside {name!r}: it reads another tokenizer than the target's; name drafts of the target's own "
                f"tokens (a same-tokenizer draft such as copy, ngram or layerskip:K)"
            )
        drafts[str(name)] = model
    return drafts


@dataclass(frozen=True)
class _Transformers:
    """transformers' counterparts of the pair: the target's model, and the keywords of its assisted generation (the
    draft's model and both tokenizers)."""

    target: object
    assisted: dict


def _transformers(inputs, draft_model, draft_tokenizer, prompts: list, settings: BenchSettings) -> _Transformers:
    """transformers' counterparts of the pair for ``--hf``: the target's model, the draft's (``assisted_options``) and
    both tokenizers; refused before any timing where the draft has none, or where the longest prompt's spelling and
    its new tokens could run past the assistant's context (transformers does not window it)."""

    options = assisted_options(draft_model, 1)
    if options is None or "assistant" not in options or not hasattr(inputs.target, "model"):
        raise ValueError("--hf needs a Hugging Face or GGUF target and a draft model transformers can run")
    assistant = options["assistant"]
    context = getattr(assistant.config, "n_positions", None) or assistant.config.max_position_embeddings
    target_vocabulary, draft_vocabulary = pair_vocabularies(inputs.tokenizer, draft_tokenizer)
    longest = max(len(draft_vocabulary.encode(target_vocabulary.decode(row))) for row in prompts)
    pieces = [len(target_vocabulary.pieces[t]) for row in prompts for t in row]
    needed = longest + 2 * settings.max_new_tokens * (sum(pieces) / len(pieces)) + max(settings.gammas)
    if needed > context:
        raise ValueError(
            f"--hf: transformers' assistant reads the whole text in its own tokens, about {needed:.0f} of them here "
            f"(the longest prompt {longest}, then twice the mean piece per new token), past its {context} positions; "
            f"lower --prompt-length or --max-new-tokens"
        )
    tokenizers = {"tokenizer": inputs.tokenizer, "assistant_tokenizer": draft_tokenizer or character_tokenizer()}
    return _Transformers(inputs.target.model, {"assistant": assistant, **tokenizers})
