"""One audit entry for the CLI (``spectheory audit``) and the report: a request names the decoder, the
models and the method; ``run_audit`` builds the models, runs the exact or the statistical audit, and
returns the report with a one-line description of what was audited (docs/theory.md §8)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from decoders import zoo
from decoders.audit import exact, mutants, setups, statistical, tree_mutants
from decoders.audit.battery import power_line
from decoders.audit.request import DECODERS, MAX_EXACT_BRANCHES, METHODS, AuditRequest, tree_shape
from decoders.audit.samples import read_samples
from decoders.autoregressive import generate_autoregressive
from decoders.bench.alpha import acceptance_calibration
from decoders.bench.cross_bench import pair_vocabularies
from decoders.bench.inputs import Pair, check_tokenizers, encode_text, read_text
from decoders.bench.prompts import text_windows
from decoders.cross_vocabulary import CrossVocabularyConfig, generate_cross_vocabulary
from decoders.drafts import FROM_TARGET, SHIPPED, DraftContext, build_draft, draft_names, open_draft
from decoders.models.corpus import character_tokenizer
from decoders.models.hf_generate import assisted_options, hf_generate
from decoders.policies import make_policy
from decoders.progress import progress_bar
from decoders.randomness import TorchRandomness
from decoders.sampling import stop_padded
from decoders.speculative import REFERENCE_STEP, SpeculativeConfig
from decoders.tree import REFERENCE_TREE_STEP, DynamicTree, TreeConfig, generate_tree

__all__ = [
    "AuditSample",
    "DECODERS",
    "METHODS",
    "SHIPPED_PROMPT",
    "AuditRequest",
    "AuditOutcome",
    "run_audit",
    "audit_pair",
    "tree_shape",
]

BATCH_ROWS = 2  # the batch method's rows, each a copy of the prompt
SHIPPED_PROMPT = "import "
SHIPPED_BATCH = 256  # sequences per decoder call: the shipped target's cache is 6 MB per row
TINY_BATCH = 8192
HF_BATCH = 64  # a Hugging Face pair: models of any size, so modest batches
HF_BATCH_CELLS = 1 << 21  # rows x V of one sampling call: large vocabularies sample in smaller batches
TEXT_PROMPT_TOKENS = 64  # --text: the prompt is a seeded window of the file's text this long (the report's length)


@dataclass(frozen=True)
class AuditOutcome:
    described: str
    report: object  # exact.ExactReport or statistical.AuditReport
    summary: str


def sampling_rows(vocab_size: int, most: int) -> int:
    """Rows per sampling call: ``most``, fewer for large vocabularies (at most ``HF_BATCH_CELLS`` logits per
    position)."""
    return max(1, min(most, HF_BATCH_CELLS // vocab_size))


def _models(request: AuditRequest) -> tuple:
    """(request with its defaults filled in, target, draft or None, batch)."""
    speculative = request.sampler == "hf-assisted" or (
        request.sampler == "ours" and request.decoder in ("speculative", "tree") and request.samples is None
    )
    if request.hugging_face:
        target, tokenizer = zoo.load_named(request.target, role="target", timed=False)
        request = replace(
            request,
            prompt=_prompt_ids(request, tokenizer),
            prompt_text=None,
            text=None,
            sampling=request.sampling.bound(tokenizer, target.vocab_size),
        )
        batch = sampling_rows(target.vocab_size, HF_BATCH)
        if not speculative:
            return request, target, None, batch
        if request.draft is None:
            raise ValueError(
                f"with --target {request.target}, give --draft: a model directory, a GGUF file or one "
                f"of the drafts built from the target ({', '.join(draft_names(FROM_TARGET))})"
            )
        draft, draft_tokenizer = open_draft(request.draft, target=(target, tokenizer))
        if request.cross_vocabulary is not None:  # a draft of another tokenizer, verified across vocabularies
            return request, target, (draft, pair_vocabularies(tokenizer, draft_tokenizer)), batch
        if request.sampler == "hf-assisted" and _tokenizer_of(draft_tokenizer) != _tokenizer_of(tokenizer):
            return request, target, (draft, (tokenizer, draft_tokenizer)), batch  # transformers' own method
        check_tokenizers(tokenizer, draft_tokenizer)
        return request, target, draft, batch
    if request.target == "shipped":
        target = zoo.load_target()
        request = replace(
            request,
            prompt=_prompt_ids(request, None),
            prompt_text=None,
            text=None,
            draft=request.draft or "transformer",
            sampling=request.sampling.bound(None, target.vocab_size),
        )
        draft = build_draft(request.draft, DraftContext(), offered=SHIPPED) if speculative else None
        return request, target, draft, SHIPPED_BATCH
    request = replace(
        request,
        prompt=request.prompt or (1, 2),
        sampling=request.sampling.bound(None, request.vocabulary),
        draft=request.draft or ("tinygpt" if request.decoder == "tree" else "tabular"),
    )
    dtype = torch.float64 if request.exact else torch.float32
    target = setups.tiny_target(request.target, request.vocabulary, dtype=dtype)
    return request, target, setups.tiny_draft(request.draft, target, dtype=dtype) if speculative else None, TINY_BATCH


def _tokenizer_of(tokenizer) -> dict:
    """A tokenizer's vocabulary (None: the corpus's characters), to tell whether two read the same tokens."""

    return (tokenizer or character_tokenizer()).get_vocab()


def _prompt_ids(request: AuditRequest, tokenizer) -> tuple:
    """The prompt as ids of ``tokenizer`` (None: the corpus's characters): ``prompt`` as given, else a window
    of ``text``'s file (``TEXT_PROMPT_TOKENS`` long, or the whole text if shorter) drawn with the seed,
    else ``prompt_text`` (default ``SHIPPED_PROMPT``) tokenized."""
    if request.prompt is not None:
        return request.prompt
    if request.text is None:
        return tuple(encode_text(tokenizer, request.prompt_text or SHIPPED_PROMPT))
    stream = np.asarray(encode_text(tokenizer, read_text(request.text)), dtype=np.int64)
    return tuple(text_windows(stream, 1, min(TEXT_PROMPT_TOKENS, len(stream)), request.seed)[0].tolist())


#: Windows x tokens of the target's own samples on which the rejection-risk policy's predictor is fitted.
AUDIT_CALIBRATION_WINDOWS = (16, 24)


def _policy(request: AuditRequest, target, draft):
    """The request's draft-length policy, capped at its gamma; rejection-risk's predictor is fitted on windows
    sampled from the target (seeded), never on the audited runs."""
    calibration = None
    if request.policy == "rejection-risk":
        count, length = AUDIT_CALIBRATION_WINDOWS
        generator = torch.Generator().manual_seed(request.seed + 1)
        starts = torch.randint(0, target.vocab_size, (count, 1), generator=generator).tolist()
        windows = torch.tensor(
            [
                stop_padded(row, length - 1, request.sampling.stop)
                for row in generate_autoregressive(
                    target,
                    starts,
                    max_new_tokens=length - 1,
                    sampling=request.sampling,
                    randomness=TorchRandomness(generator),
                ).tokens
            ]
        )
        windows = torch.cat([torch.tensor(starts), windows], dim=1)
        calibration = acceptance_calibration(target, draft, windows, request.sampling, skip=1)
    return make_policy(
        request.policy,
        gamma=request.gamma,
        cap=request.gamma,
        calibration=calibration,
        batch_size=BATCH_ROWS if request.exact == "batch" else 1,
    )


def _exact(request: AuditRequest, target, draft, config, step, generate) -> tuple:
    prompt, generate = list(request.prompt), setups.stop_padding(generate, request.horizon, config.sampling.stop)
    reference = exact.autoregressive_law(target, prompt, config.sampling, request.horizon)

    method = "whole-run" if request.exact == "dp" and request.decoder == "autoregressive" else request.exact
    budget = MAX_EXACT_BRANCHES[method]
    if method == "dp" and request.decoder == "tree":
        law, branches = exact.tree_law(target, draft, prompt, config, request.horizon, step=step, max_branches=budget)
    elif method == "dp":
        law, branches = exact.speculative_law(
            target, draft, prompt, config, request.horizon, step=step, max_branches=budget
        )
    elif method == "whole-run":
        law, branches = exact.whole_run_law(lambda randomness: generate([prompt], randomness)[0], max_branches=budget)
    else:
        law, branches = exact.whole_run_law(
            lambda randomness: sum(generate([prompt] * BATCH_ROWS, randomness), ()), max_branches=budget
        )
        reference = exact.product_law(reference, BATCH_ROWS)
    report = exact.compare_laws(law, reference, method=method, horizon=request.horizon, branches=branches)
    return report, (
        f"exact ({method}): {report.branches} branches, {report.sequences} sequences, total mass "
        f"{report.total_mass:.15f}, max |law - target| {report.max_abs_difference:.3g}, total "
        f"variation {report.total_variation:.3g}, tolerance {report.tolerance:g}"
    )


def _statistical_summary(report) -> str:
    """One line from the battery's outcomes (``decoders.audit.battery``): each test's p-value, and each power
    statement once."""
    tests = ", ".join(f"{outcome.name} {outcome.p_value:.3g}" for outcome in report.battery)
    return (
        f"statistical: n = {report.n}, p = {report.p_value:.3g} (Bonferroni over {report.tests} tests: "
        f"{tests}), level {report.level:g}; detects with 90% power {power_line(report.battery)}; "
        f"{report.seconds:.1f} s ({report.sampling_seconds:.1f} s sampling)"
    )


def deviation_lines(report) -> str:
    """Where a failed statistical audit's samples deviate most, and what that suggests ("" otherwise)."""
    deviation = getattr(report, "deviation", None)
    if report.passed or deviation is None:
        return ""
    if deviation["p_value"] >= report.level / report.tests:  # every marginal passes: the failure is elsewhere
        pairs = [pair for pair in report.strongest_pairs.values() if pair]
        strongest = max(pairs, key=lambda pair: abs(pair[2]), default=None)
        return (
            f"every new token's own law passes (smallest uniformity p = {deviation['p_value']:.3g}, at new token "
            f"{deviation['position']}): the samples fail on dependence between positions or on the joint law"
            + (
                ""
                if strongest is None
                else f"; strongest pair: new tokens {strongest[0]} and {strongest[1]}, "
                f"normal-score correlation {strongest[2]:.3f}"
            )
        )
    tokens = ", ".join(
        f"token {t} {observed} times for {expected:.1f} expected" for t, observed, expected in deviation["tokens"]
    )
    where = f"deviates most at new token {deviation['position']} (uniformity p = {deviation['p_value']:.3g}): {tokens}"
    if deviation["first_position_only"]:
        where += (
            "\nonly the first new token deviates: the sampler likely read the prompt differently from the "
            "target (a padding mask over a prompt token, an added or missing BOS token, another template)"
        )
    return where


def run_audit(request: AuditRequest) -> AuditOutcome:
    """Build the request's models and decoder, then audit it exactly or statistically."""
    tree = request.decoder == "tree"
    bug = None if request.mutant is None else (tree_mutants.tree_mutant if tree else mutants.mutant)(request.mutant)
    request, target, draft, batch = _models(request)  # the sampling's grammar compiled for the target's vocabulary
    config = (
        TreeConfig(tree_shape(request.tree), request.sampling, request.verifier)
        if tree
        else SpeculativeConfig(request.gamma, request.sampling, request.lenience, request.verifier)
    )
    if any(not 0 <= token < target.vocab_size for token in request.prompt):
        raise ValueError(f"prompt tokens must be in [0, {target.vocab_size}), got {list(request.prompt)}")
    if request.policy is not None:
        config = replace(config, policy=_policy(request, target, draft))
    step = (REFERENCE_TREE_STEP if tree else REFERENCE_STEP) if bug is None else bug.step
    if request.samples is not None:
        return _audit_samples(request, target)
    if request.sampler != "ours":
        return _audit_hf_generate(request, target, draft)
    if request.cross_vocabulary is not None:
        generate, described = _cross_vocabulary_run(request, target, *draft)
        draft = None  # its law is over another vocabulary: the audit's orderings by the target's law only
    elif tree:

        def generate(prompts, randomness):
            return generate_tree(
                target, draft, prompts, max_new_tokens=request.horizon, config=config, randomness=randomness, step=step
            ).tokens

        shape = "" if isinstance(config.tree, DynamicTree) else f" (parents {list(config.tree.parents)})"
        described = (
            f"tree ({request.mutant or 'reference'}), {request.verifier} verifier, tree {request.tree}{shape}, "
            f"draft {request.draft}"
        )
    elif request.decoder == "speculative":
        generate = setups.speculative_run(
            target,
            draft,
            request.prompt,
            config,
            request.horizon,
            step=step,
            source=None if bug is None else bug.source,
        )
        described = (
            f"speculative ({request.mutant or 'reference'}), {request.verifier} verifier, gamma "
            f"{request.gamma}, lenience {request.lenience:g}, draft {request.draft}"
            + ("" if config.policy is None else f", policy {config.policy.describe()}")
        )
    else:

        def generate(prompts, randomness):
            return generate_autoregressive(
                target, prompts, max_new_tokens=request.horizon, sampling=request.sampling, randomness=randomness
            ).tokens

        described = "autoregressive"
    described += (
        f"; target {request.target}, V = {target.vocab_size}, {request.sampling}, prompt "
        f"{list(request.prompt)}, horizon {request.horizon}"
    )
    if request.exact:
        report, summary = _exact(request, target, draft, config, step, generate)
    else:
        sample = setups.sampler(generate, request.prompt, request.horizon, batch=batch, stop=request.sampling.stop)
        report = _audit_sampler(request, sample, target, draft)
        summary = _statistical_summary(report)
    return AuditOutcome(described, report, summary)


def _audit_sampler(request: AuditRequest, sample, target, draft):
    """The statistical audit of ``sample`` (n, generator -> tokens ``[n, horizon]``) against ``target`` on
    ``request``'s prompt, sampling, n, horizon, seed and level; ``draft`` (or None) adds the orderings by its q."""
    return statistical.audit_sampler(
        sample,
        target,
        list(request.prompt),
        request.sampling,
        n=request.n,
        horizon=request.horizon,
        seed=request.seed,
        draft=draft,
        level=request.level,
    )


def _audit_samples(request: AuditRequest, target) -> AuditOutcome:
    """The statistical audit of an engine's samples (``request.samples``) against ``target``."""
    samples = read_samples(request.samples, target.vocab_size, request.sampling.stop)
    n, horizon = samples.tokens.shape
    report = statistical.audit_sampler(
        samples.sampler(),
        target,
        list(samples.prompt),
        request.sampling,
        n=n,
        horizon=horizon,
        seed=request.seed,
        level=request.level,
    )
    described = (
        f"samples of {request.samples}: {n} continuations of {horizon} tokens after a prompt of "
        f"{len(samples.prompt)} tokens; target {request.target}, V = {target.vocab_size}, {request.sampling}"
    )
    return AuditOutcome(described, report, _statistical_summary(report))


def _cross_vocabulary_run(request: AuditRequest, target, draft, vocabularies) -> tuple:
    """(generate, described) of our cross-vocabulary decoder (``decoders.cross_vocabulary``) on a real target: rows
    decoded one at a time, a batch of prompts per call."""
    config = CrossVocabularyConfig(request.cross_vocabulary, request.gamma, request.sampling)
    target_vocabulary, draft_vocabulary = vocabularies

    def generate(prompts, randomness):
        return generate_cross_vocabulary(
            target,
            draft,
            prompts,
            target_vocabulary=target_vocabulary,
            draft_vocabulary=draft_vocabulary,
            max_new_tokens=request.horizon,
            config=config,
            randomness=randomness,
        ).tokens

    described = (
        f"cross-vocabulary {request.cross_vocabulary}, gamma {request.gamma}, draft {request.draft} "
        f"({draft_vocabulary.size} pieces)"
    )
    return generate, described


def _audit_hf_generate(request: AuditRequest, target, draft) -> AuditOutcome:
    """transformers' ``generate`` (plain, or assisted by ``draft``'s counterpart there: an assistant model, prompt
    lookup for copy, early exit for layerskip) audited as a black box at batch 1: one call per sample, its global
    RNG seeded from the audit's generator."""
    prompt = torch.tensor([request.prompt], device=target.device)
    draft, tokenizers = draft if isinstance(draft, tuple) else (draft, None)
    options = {} if draft is None else assisted_options(draft, request.assistant_tokens)
    if tokenizers is not None and options is not None:  # transformers' own method across vocabularies
        target_tokenizer, draft_tokenizer = tokenizers
        options.update(tokenizer=target_tokenizer, assistant_tokenizer=draft_tokenizer or character_tokenizer())
    if options is None:
        raise ValueError(
            f"--sampler hf-assisted: transformers has no counterpart of --draft {request.draft}; give a "
            f"model (GGUF file, directory or TinyGPT), copy (prompt lookup) or layerskip:K (early exit)"
        )
    if "assistant" in options:
        options.update(schedule=request.assistant_schedule, threshold=request.assistant_confidence)

    def sample(n: int, generator: torch.Generator) -> torch.Tensor:
        randomness = TorchRandomness(generator)
        return torch.tensor(
            [
                stop_padded(
                    hf_generate(target.model, prompt, request.horizon, request.sampling, randomness, **options),
                    request.horizon,
                    request.sampling.stop,
                )
                for _ in progress_bar(None, range(n), desc=request.sampler, unit="sample")
            ]
        )

    # a draft of another vocabulary has its q over that one: the orderings by p only
    report = _audit_sampler(request, sample, target, draft if tokenizers is None else None)
    described = (
        f"transformers generate ({request.sampler}"
        + (
            ""
            if draft is None
            else f", {request.assistant_tokens} assistant tokens, {request.assistant_schedule}"
            f" schedule, confidence threshold {request.assistant_confidence:g}, assistant {request.draft}"
            + ("" if tokenizers is None else " with its own tokenizer")
        )
        + f"); target {request.target}, V = {target.vocab_size}, {request.sampling}, prompt "
        f"{list(request.prompt)}, horizon {request.horizon}"
    )
    return AuditOutcome(described, report, _statistical_summary(report))


@dataclass(frozen=True)
class AuditSample:
    """What a statistical audit of a loaded pair draws: ``n`` continuations of ``horizon`` tokens from ``seed``."""

    n: int
    horizon: int
    seed: int = 0


def audit_pair(
    pair: Pair, prompt: list, config: SpeculativeConfig, sample: AuditSample, *, progress=None, step=REFERENCE_STEP
) -> statistical.AuditReport:
    """The statistical audit of speculative decoding on a loaded pair (the report's audit); ``step`` the iteration
    (a mutant's, for a negative control)."""
    target, draft, n, horizon, seed = pair.target, pair.draft, sample.n, sample.horizon, sample.seed
    generate = setups.speculative_run(target, draft, prompt, config, horizon, step=step)
    sampler = setups.sampler(
        generate,
        prompt,
        horizon,
        batch=sampling_rows(target.vocab_size, SHIPPED_BATCH),
        progress=progress,
        stop=config.sampling.stop,
    )
    return statistical.audit_sampler(
        sampler, target, prompt, config.sampling, n=n, horizon=horizon, seed=seed, draft=draft
    )
