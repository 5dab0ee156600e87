"""The prepared device check (docs/gpu.md): on one device, within a time budget, our decoders' paths there held
against autoregressive decoding and the exact law, a short statistical audit, and the cost profiles of
SmolLM2-shaped Llama models with random weights (a forward pass costs the same whatever the weights' values),
written as `spectheory profile` documents that `spectheory gamma --costs` and `spectheory tree --costs` read.

Sections run in order of importance and each is recorded as it ends, so a run cut short keeps what it measured;
a section that raises is recorded with its error and the rest still run; once the budget is spent the remaining
sections are recorded as skipped.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from decoders import zoo
from decoders.audit import exact, mutants, setups
from decoders.audit.request import tree_shape
from decoders.audit.runs import AuditSample, audit_pair
from decoders.audit.verdict import ExactReport
from decoders.autoregressive import generate_autoregressive
from decoders.bench.bench import BenchSettings, environment
from decoders.bench.compiled_check import COMPILED_DRY_RUN, COMPILED_FULL, CompiledSizes, compiled_section
from decoders.bench.device_document import (
    CallTable,
    DeviceCheckDocument,
    GreedyEquality,
    ProfileSummary,
    Section,
    SectionError,
    StatisticalCase,
)
from decoders.bench.documents import ProfileDocument
from decoders.bench.inputs import Pair
from decoders.bench.profile import ProfilePlan, efficiency, measure_profile, profile_checks, verify_widths_job
from decoders.bench.prompts import text_windows
from decoders.drafts import open_draft
from decoders.models.corpus import load_corpus
from decoders.models.hf import HFCausalLM, layer_skip
from decoders.models.protocol import synchronize
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import REFERENCE_STEP, SpeculativeConfig, generate_speculative
from decoders.tree import TreeConfig, generate_tree
from plumbing.outputs import write_json
from plumbing.timing import PACKAGES, time_repeats
from plumbing.validation import as_positive_int

__all__ = ["LlamaShape", "SHAPES", "CheckSizes", "FULL", "DRY_RUN", "ProfiledPair", "run_check", "REPORT_NAME"]

REPORT_NAME = "device_check.json"


@dataclass(frozen=True)
class LlamaShape:
    """A Llama model's shape (transformers' ``LlamaConfig`` fields); SmolLM2's are those of its published configs."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int = 49152
    max_position_embeddings: int = 8192

    def build(self, device, dtype: torch.dtype, seed: int = 0):
        """An ``HFCausalLM`` of this shape with seeded random weights, made on ``device`` (no copy through the
        host), with sdpa attention and tied embeddings as SmolLM2's."""
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            vocab_size=self.vocab_size,
            max_position_embeddings=self.max_position_embeddings,
            tie_word_embeddings=True,
            rope_theta=100000.0,
            attn_implementation="sdpa",
        )
        device = torch.device(device)
        # transformers' constructor draws its initial weights from the global generators (in a fork: the caller's
        # untouched); every drawn weight is then redrawn from our own generator, by transformers' law for Llama
        # (linear and embedding weights N(0, initializer_range); the norms' ones were not drawn)
        generator = torch.Generator(device).manual_seed(seed)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), device, torch.no_grad():
            model = LlamaForCausalLM(config)
            for module in model.modules():
                if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                    module.weight.normal_(0.0, config.initializer_range, generator=generator)
            model = model.to(dtype)
        return HFCausalLM(model)

    def parameters(self) -> int:
        """Weights in the model (tied embeddings counted once)."""
        attention = (
            self.hidden_size * self.hidden_size * 2
            + 2 * self.hidden_size * (self.hidden_size // self.num_attention_heads) * self.num_key_value_heads
        )
        layer = attention + 3 * self.hidden_size * self.intermediate_size + 2 * self.hidden_size
        return self.vocab_size * self.hidden_size + self.num_hidden_layers * layer + self.hidden_size


SHAPES = {
    shape.name: shape
    for shape in (
        LlamaShape("smollm2-135m", 576, 1536, 30, 9, 3),
        LlamaShape("smollm2-360m", 960, 2560, 32, 15, 5),
        LlamaShape("smollm2-1.7b", 2048, 8192, 24, 32, 32),
        LlamaShape("llama-7b-shape", 4096, 11008, 32, 32, 8),  # SmolLM2's family at 7B size (the compiled section)
        LlamaShape("tiny-llama", 64, 128, 2, 4, 2, vocab_size=512, max_position_embeddings=512),
    )
}


@dataclass(frozen=True)
class ProfiledPair:
    """A profiled pair: a target shape and a draft, another shape or a draft built from the target (``decoders.drafts``:
    copy)."""

    target: str
    draft: str
    gamma_max: int

    @property
    def name(self) -> str:
        return f"{self.target}_draft_{self.draft}"  # letters, digits, '.', '_' and '-' only: a portable file name


@dataclass(frozen=True)
class CheckSizes:
    """What the check runs. ``FULL`` fits one H100 in a few minutes; ``DRY_RUN`` is the suite's CPU run."""

    pairs: tuple  # of ProfiledPair: cost profiles at batch 1, verify widths 1..verify_widths
    verify_widths: int
    call_shapes: tuple  # shapes whose call costs are tabled at every batch, width and dtype below
    call_batches: tuple
    call_widths: tuple
    dtypes: tuple  # the first is the profiles'; the call table runs each
    greedy_shape: str  # random-weight shape decoded greedily beside the shipped pair (float32)
    greedy_tokens: int
    greedy_prompts: int
    audit_n: int  # the shipped pair's statistical audit, and its planted-bug control
    exact_horizon: int
    settings: BenchSettings  # the profiles' prompts, lengths, repeats
    compiled: CompiledSizes | None = None  # the compiled path's section (decoders.bench.compiled_check)

    def as_dict(self) -> dict:
        return {
            "pairs": [vars(p) for p in self.pairs],
            "verify_widths": self.verify_widths,
            "call_shapes": list(self.call_shapes),
            "call_batches": list(self.call_batches),
            "call_widths": list(self.call_widths),
            "dtypes": list(self.dtypes),
            "greedy_shape": self.greedy_shape,
            "greedy_tokens": self.greedy_tokens,
            "greedy_prompts": self.greedy_prompts,
            "audit_n": self.audit_n,
            "exact_horizon": self.exact_horizon,
            "settings": self.settings.as_dict(),
            "compiled": None if self.compiled is None else self.compiled.as_dict(),
        }


FULL = CheckSizes(
    pairs=(
        ProfiledPair("smollm2-135m", "copy", 8),
        ProfiledPair("smollm2-1.7b", "smollm2-135m", 4),
        ProfiledPair("smollm2-360m", "smollm2-135m", 4),
    ),
    verify_widths=64,
    call_shapes=("smollm2-135m", "smollm2-360m", "smollm2-1.7b"),
    call_batches=(1, 4, 16),
    call_widths=(1, 2, 4, 8, 16, 32, 64),
    dtypes=("bfloat16",),
    greedy_shape="smollm2-135m",
    greedy_tokens=48,
    greedy_prompts=4,
    audit_n=4000,
    exact_horizon=3,
    settings=BenchSettings((8,), (0.0,), prompts=2, prompt_length=64, max_new_tokens=24, repeats=3, warmup=1),
    compiled=COMPILED_FULL,
)
DRY_RUN = CheckSizes(
    pairs=(ProfiledPair("tiny-llama", "copy", 3), ProfiledPair("tiny-llama", "tiny-llama", 2)),
    verify_widths=6,
    call_shapes=("tiny-llama",),
    call_batches=(1, 2),
    call_widths=(1, 4),
    dtypes=("float32",),
    greedy_shape="tiny-llama",
    greedy_tokens=12,
    greedy_prompts=2,
    audit_n=300,
    exact_horizon=2,
    settings=BenchSettings((3,), (0.0,), prompts=2, prompt_length=8, max_new_tokens=6, repeats=2, warmup=0),
    compiled=COMPILED_DRY_RUN,
)

#: The tree of the greedy checks and the exact tree audit.
TREE = "kary:2:2"
#: Characters of the held-out corpus the shipped pair's prompts are drawn from (all of it takes seconds to read).
PROMPT_CHARACTERS = 200_000
#: The planted bug every exact and statistical case must catch (docs/theory.md §8).
CONTROL_MUTANT = "residual-from-p"


def _first_difference(ours: tuple, reference: tuple) -> list | None:
    """[row, position] of the first token where two decodings differ, None when equal."""
    for row, (a, b) in enumerate(zip(ours, reference)):
        for position, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return [row, position]
        if len(a) != len(b):
            return [row, min(len(a), len(b))]
    return None


def greedy_equality(target, draft, prompts: torch.Tensor, tokens: int) -> dict[str, GreedyEquality]:
    """Greedy decoding by the chain (gamma 4) and tree (``TREE``) decoders against autoregressive decoding on
    the same prompts ``[P, L]``: {decoder: GreedyEquality}; efficiency is the fraction of the run's wall time spent
    inside the models' calls (``decoders.bench.profile.efficiency``)."""
    greedy = Sampling(0.0)
    runs = {
        "autoregressive": lambda: generate_autoregressive(
            target, prompts, max_new_tokens=tokens, sampling=greedy, randomness=seeded(0, target.device), profile=True
        ),
        "chain gamma 4": lambda: generate_speculative(
            target,
            draft,
            prompts,
            max_new_tokens=tokens,
            config=SpeculativeConfig(4, greedy),
            randomness=seeded(0, target.device),
            profile=True,
        ),
        f"tree {TREE}": lambda: generate_tree(
            target,
            draft,
            prompts,
            max_new_tokens=tokens,
            config=TreeConfig(tree_shape(TREE), greedy),
            randomness=seeded(0, target.device),
            profile=True,
        ),
    }
    generations = {name: run() for name, run in runs.items()}
    reference = generations["autoregressive"].tokens
    return {
        name: GreedyEquality(
            equal=g.tokens == reference,
            first_difference=_first_difference(g.tokens, reference),
            efficiency=efficiency([g.stats]),
        )
        for name, g in generations.items()
    }


def exact_cases(device, horizon: int) -> dict[str, ExactReport]:
    """The exact audit's small cases on ``device`` (float64 TinyGPT target and draft, V = 5, prompt [1, 2]): the
    chain at T = 1 and at T = 0.8 with top-k 3, the tree ``TREE``, and the planted bug ``CONTROL_MUTANT``, which
    must fail."""
    target = setups.tiny_target("tinygpt", 5).to(device)
    draft = setups.tiny_draft("tinygpt", target).to(device)
    prompt, cases = [1, 2], {}
    bug = mutants.mutant(CONTROL_MUTANT)
    chains = {
        "chain T=1": (Sampling(1.0), REFERENCE_STEP),
        "chain T=0.8 top-k 3": (Sampling(0.8, top_k=3), REFERENCE_STEP),
        f"chain T=1 {CONTROL_MUTANT} (must fail)": (Sampling(1.0), bug.step),
    }
    for name, (sampling, step) in chains.items():
        law, branches = exact.speculative_law(
            target, draft, prompt, SpeculativeConfig(2, sampling), horizon, step=step, progress=False
        )
        cases[name] = _compared(law, exact.autoregressive_law(target, prompt, sampling, horizon), horizon, branches)
    sampling = Sampling(1.0)
    law, branches = exact.tree_law(
        target, draft, prompt, TreeConfig(tree_shape(TREE), sampling), horizon, progress=False
    )
    cases[f"tree {TREE} T=1"] = _compared(
        law, exact.autoregressive_law(target, prompt, sampling, horizon), horizon, branches
    )
    return cases


def _compared(law, reference, horizon: int, branches: int) -> ExactReport:
    return exact.compare_laws(law, reference, method="dp", horizon=horizon, branches=branches)


def statistical_cases(target, draft, prompt: list, n: int, seed: int = 0) -> dict[str, StatisticalCase]:
    """The shipped pair's statistical audit at T = 1, gamma 4, horizon 4 on its device, and the planted bug
    ``CONTROL_MUTANT`` through the same test."""
    config = SpeculativeConfig(4, Sampling(1.0))
    bug = mutants.mutant(CONTROL_MUTANT)
    reports = {
        "reference": audit_pair(Pair(target, draft), prompt, config, AuditSample(n, 4, seed), progress=False),
        f"{CONTROL_MUTANT} (must fail)": audit_pair(
            Pair(target, draft), prompt, config, AuditSample(n, 4, seed), progress=False, step=bug.step
        ),
    }
    return {
        name: StatisticalCase(
            passed=r.passed, p_value=r.p_value, n=r.n, detectable_tv=r.detectable_tv, seconds=r.seconds
        )
        for name, r in reports.items()
    }


def random_prompts(vocab_size: int, count: int, length: int, seed: int, device) -> torch.Tensor:
    """``[count, length]`` seeded uniform token ids (random-weight models have no text of their own)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (count, length), generator=generator).to(device)


def _draft_for(pair: ProfiledPair, target, device, dtype):
    if pair.draft in SHAPES:
        return SHAPES[pair.draft].build(device, dtype, seed=1)
    return open_draft(pair.draft, device=device, dtype=dtype, target=(target, None))[0]


def profile_pair(pair: ProfiledPair, sizes: CheckSizes, device, dtype_name: str) -> ProfileDocument:
    """``pair``'s cost profile at batch 1 and T = 0 as a `spectheory profile` document."""
    dtype = getattr(torch, dtype_name)
    target = SHAPES[pair.target].build(device, dtype, seed=0)
    draft = _draft_for(pair, target, device, dtype)
    s = replace(sizes.settings, gammas=(pair.gamma_max,))
    prompts = random_prompts(target.vocab_size, s.prompts, s.prompt_length, s.seed, device)
    plan = ProfilePlan(pair.gamma_max, s.max_new_tokens, s.warmup, repeats=s.repeats, verify_widths=sizes.verify_widths)
    profile, spread = measure_profile(Pair(target, draft), prompts, Sampling(0.0), plan)
    return ProfileDocument(
        target=pair.target + " (random weights)",
        draft=pair.draft,
        environment=environment(target.device, dtype),
        batch_size=1,
        temperature=0.0,
        text="random token ids",
        settings=s.as_dict(),
        profile=profile,
        spread=spread,
        checks=profile_checks(profile, spread),
    )


def call_table(shape: str, sizes: CheckSizes, device, dtype_name: str) -> CallTable:
    """Seconds of one target call with greedy sampling at every batch and width of ``sizes`` (median over the
    repeats, with min and max), after a prompt of ``settings.prompt_length``: {batch: {width: [min, median, max]}}."""
    dtype, s = getattr(torch, dtype_name), sizes.settings
    model = SHAPES[shape].build(device, dtype, seed=0)
    table = {}
    for batch in sizes.call_batches:
        prompts = random_prompts(model.vocab_size, batch, s.prompt_length, s.seed, device)
        records = []
        job = verify_widths_job(model, prompts, Sampling(0.0), sizes.call_widths, records.append, steps=2)
        time_repeats(job, repeats=s.repeats, warmup=s.warmup, synchronize=lambda: synchronize(device))
        timed = records[s.warmup :]
        table[str(batch)] = {
            str(k): [min(r[k] for r in timed), float(np.median([r[k] for r in timed])), max(r[k] for r in timed)]
            for k in sizes.call_widths
        }
    del model
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
    return CallTable(
        shape=vars(SHAPES[shape]), parameters=SHAPES[shape].parameters(), dtype=dtype_name, seconds_per_call=table
    )


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["cuda"] = torch.version.cuda
    return versions


def _shipped_prompts(count: int, length: int, device) -> torch.Tensor:

    held_out = load_corpus(max_characters=PROMPT_CHARACTERS).held_out
    return torch.as_tensor(text_windows(np.asarray(held_out), count, length, 0)).to(device)


def _environment(device: torch.device, dtype_name: str) -> dict[str, object]:
    """``decoders.bench.bench.environment`` with the packages' versions and, on CUDA, the device's size."""
    described = dict(environment(device, getattr(torch, dtype_name)), versions=_versions())
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        described.update(
            gpu_memory_bytes=properties.total_memory,
            multiprocessors=properties.multi_processor_count,
            capability=list(torch.cuda.get_device_capability(device)),
        )
    return described


def _sections(sizes: CheckSizes, device: torch.device, out: Path, command: str) -> list:
    """[(name, callable)] in the order they run: the correctness checks, the call tables (seconds each), then the
    profiles (minutes each)."""

    def shipped_pair():
        return zoo.load_pair(device=device)

    def greedy():
        target, draft = shipped_pair()
        shipped = greedy_equality(
            target, draft, _shipped_prompts(sizes.greedy_prompts, 32, device), sizes.greedy_tokens
        )
        shape = SHAPES[sizes.greedy_shape]
        model, early = shape.build(device, torch.float32, seed=0), max(1, shape.num_hidden_layers // 4)
        prompts = random_prompts(shape.vocab_size, sizes.greedy_prompts, 32, 0, device)
        return {  # {group: {decoder: GreedyEquality}}
            "shipped pair (float32)": shipped,
            f"{shape.name} random weights, layerskip:{early} draft (float32)": greedy_equality(
                model, layer_skip(model, early), prompts, sizes.greedy_tokens
            ),
        }

    def statistical():
        target, draft = shipped_pair()
        return statistical_cases(target, draft, _shipped_prompts(1, 8, device)[0].tolist(), sizes.audit_n)

    sections = [
        ("exact", lambda: exact_cases(device, sizes.exact_horizon)),
        ("greedy", greedy),
        ("statistical", statistical),
    ]
    if sizes.compiled is not None:  # before the eager tables and profiles: the issue-69 numbers come first
        sections.append(
            (f"compiled {sizes.dtypes[0]}", lambda: compiled_section(SHAPES, sizes.compiled, device, sizes.dtypes[0]))
        )
    sections += [
        (
            f"calls {shape} {dtype_name}",
            lambda shape=shape, dtype_name=dtype_name: call_table(shape, sizes, device, dtype_name),
        )
        for dtype_name in sizes.dtypes
        for shape in sizes.call_shapes
    ]
    return sections + [
        (f"profile {pair.name} {sizes.dtypes[0]}", _profile_section(pair, sizes, device, out, command))
        for pair in sizes.pairs
    ]


def run_check(
    out: Path, *, device, sizes: CheckSizes, budget_seconds: float, command: str, log=print
) -> DeviceCheckDocument:
    """Every section in turn, each written to ``out/device_check.json`` as it ends and profiles to
    ``out/profile_<pair>_<dtype>.json``; returns the whole document."""
    as_positive_int("budget_seconds", int(budget_seconds))
    device, out, start = torch.device(device), Path(out), time.perf_counter()
    document = DeviceCheckDocument(
        kind="spectheory device check",
        environment=_environment(device, sizes.dtypes[0]),
        sizes=sizes.as_dict(),
        budget_seconds=budget_seconds,
    )
    for name, section in _sections(sizes, device, out, command):
        elapsed = time.perf_counter() - start
        if elapsed > budget_seconds:
            spent = f"the budget of {budget_seconds:g} s was spent ({elapsed:.0f} s)"
            document = replace(document, sections=document.sections + (Section(name=name, skipped=spent),))
            log(f"[{elapsed:6.0f} s] {name}: skipped (budget)")
            continue
        try:
            result, status = section(), "ok"
        except Exception as error:  # a section's failure is a finding: recorded, and the others still run
            result = SectionError(error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc(limit=8))
            status = f"error: {result.error}"
        seconds = time.perf_counter() - start - elapsed
        document = replace(
            document,
            sections=document.sections + (Section(name=name, seconds=seconds, result=result),),
            elapsed_seconds=time.perf_counter() - start,
        )
        write_json(out / REPORT_NAME, document.as_dict(), command=command)
        log(f"[{time.perf_counter() - start:6.0f} s] {name}: {status} ({seconds:.1f} s)")
    return document


def _profile_section(pair: ProfiledPair, sizes: CheckSizes, device, out: Path, command: str):
    def section():
        document = profile_pair(pair, sizes, device, sizes.dtypes[0])
        path = write_json(out / f"profile_{pair.name}_{sizes.dtypes[0]}.json", document.as_dict(), command=command)
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()
        p = document.profile
        return ProfileSummary(
            file=path.name,
            t_step=p.t_step,
            t_draft=p.t_draft,
            t_iteration=p.t_iteration,
            c=p.c,
            t_verify=list(p.t_verify),
        )

    return section
