"""What ``spectheory audit`` is asked: ``AuditRequest``, every flag combination checked before any model loads
(docs/theory.md §8), and the tree shapes it names (``tree_shape``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from decoders.audit import setups, statistical, tree_mutants
from decoders.models.gguf import REAL_MODELS, is_gguf_file
from decoders.models.hf import is_model_directory
from decoders.models.hf_generate import SCHEDULES, check_hf_sampling
from decoders.policies import POLICIES
from decoders.sampling import Sampling
from decoders.tree import DynamicTree
from decoders.verification import TREE_VERIFIERS
from plumbing.validation import as_int, as_non_negative_int, as_positive_int
from spectheory.trees import Tree
from spectheory.vocabularies import METHODS as CROSS_METHODS

__all__ = ["DECODERS", "METHODS", "SAMPLERS", "AuditRequest", "tree_shape", "MAX_EXACT_BRANCHES"]

DECODERS = ("speculative", "autoregressive", "tree")
#: Most branches an exact audit runs, per method (``exact.prefix_law`` and ``exact.whole_run_law`` count them as
#: they go, and stop as soon as those run and those known to be waiting exceed it). Measured on 2 cores of an AMD
#: EPYC (docs/project.md): the prefix programme runs 12,000-24,000 branches a second (tree kseq to chains), whole
#: runs about 200, so either budget is a few minutes, and every audit that fits in a minute runs.
MAX_EXACT_BRANCHES = {"dp": 3_000_000, "whole-run": 50_000, "batch": 50_000}
#: Whose sampler is audited: our decoder, or transformers' plain or assisted generation (batch 1, a black box).
SAMPLERS = ("ours", "hf-generate", "hf-assisted")
METHODS = ("dp", "whole-run", "batch")  # exact: prefix dynamic programme, whole runs, whole runs of a batch
MAX_EXACT_SEQUENCES = 100_000  # V^horizon: memory of the laws, and hours of enumeration beyond it


@dataclass(frozen=True)
class AuditRequest:
    """What to audit. ``target`` is a tiny model kind (``setups.TARGETS``), "shipped" or a Hugging Face model directory
    (then ``draft`` is one too); ``draft`` defaults to "tabular" (tiny) or "transformer" (shipped); ``prompt`` to [1, 2]
    (tiny), a window of ``text``'s file, or ``prompt_text``'s ids. With ``samples`` (a JSON Lines file, see
    ``decoders.audit.samples``) the file's continuations are audited instead of a decoder of ours."""

    decoder: str = "speculative"
    mutant: str | None = None
    target: str = "tinygpt"
    draft: str | None = None
    vocabulary: int = 5
    verifier: str = "token"
    gamma: int = 2
    sampling: Sampling = field(default_factory=Sampling)
    lenience: float = 1.0
    prompt: tuple | None = None
    prompt_text: str | None = None
    text: str | None = None  # a UTF-8 file: the prompt is a seeded window of its text
    horizon: int = 4
    n: int = 20_000
    level: float = 0.01
    seed: int = 0
    exact: str | None = None  # None: statistical; else one of METHODS
    samples: str | None = None
    sampler: str = "ours"
    assistant_tokens: int = 5  # hf-assisted: transformers' num_assistant_tokens, schedule, confidence threshold
    assistant_schedule: str = "constant"
    assistant_confidence: float = 0.0
    tree: str = "kary:2:2"  # the tree decoder's static shape (``tree_shape``)
    policy: str | None = None  # a draft-length policy of decoders.policies.POLICIES, capped at gamma
    cross_vocabulary: str | None = None  # a draft with another tokenizer, verified by this method (docs §15)

    @property
    def hugging_face(self) -> bool:
        return self.target not in setups.TARGETS + ("shipped",)

    def __post_init__(self) -> None:
        if self.hugging_face and not (
            is_model_directory(self.target) or is_gguf_file(self.target) or self.target in REAL_MODELS
        ):
            raise ValueError(
                f"target must be one of {setups.TARGETS + ('shipped',) + tuple(REAL_MODELS)}, a GGUF "
                f"file or a Hugging Face model directory, got {self.target!r} (nothing is downloaded)"
            )
        if self.samples is not None and (self.exact or self.mutant):
            raise ValueError("--samples audits the samples in the file: --exact and --mutant do not apply")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.sampler != "ours":
            self._check_hf_sampler()
        if self.cross_vocabulary is not None:
            self._check_cross_vocabulary()
        as_positive_int("horizon", self.horizon)
        as_int("n", self.n, low=2, high=statistical.MAX_SAMPLES)
        as_non_negative_int("seed", self.seed)
        if self.decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {self.decoder!r}")
        if self.exact is not None and self.exact not in METHODS:
            raise ValueError(f"exact must be one of {METHODS}, got {self.exact!r}")
        if self.decoder == "tree":
            self._check_tree()
        elif self.mutant is not None and self.decoder != "speculative":
            raise ValueError(f"mutants are speculative and tree decoders, got --decoder {self.decoder}")
        if self.policy is not None:
            if self.policy not in POLICIES:
                raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
            if self.decoder != "speculative" or self.verifier != "token":
                raise ValueError(
                    f"--policy applies to the speculative decoder with the token verifier, got --decoder "
                    f"{self.decoder} --verifier {self.verifier}"
                )
        if self.target not in setups.TARGETS and self.exact:
            raise ValueError(f"--exact enumerates tiny models only; audit --target {self.target} statistically")
        as_int("vocab_size", self.vocabulary, low=2, high=setups.MAX_VOCABULARY)
        if self.target in setups.TARGETS:
            self.sampling.check_vocabulary(self.vocabulary)
        if self.exact and self.horizon * math.log(self.vocabulary) > math.log(MAX_EXACT_SEQUENCES):
            raise ValueError(
                f"--exact enumerates V^horizon = {self.vocabulary}^{self.horizon} sequences, more than "
                f"{MAX_EXACT_SEQUENCES:,}: lower --horizon or --vocabulary"
            )
        if sum(given is not None for given in (self.prompt, self.prompt_text, self.text)) > 1:
            raise ValueError("give one of --prompt, --prompt-text and --text")
        for flag, given in (("--prompt-text", self.prompt_text), ("--text", self.text)):
            if self.target in setups.TARGETS and given is not None:
                raise ValueError(
                    f"{flag} goes with --target shipped or a model directory (tiny models take --prompt token ids)"
                )
        if self.samples is not None and self.text is not None:
            raise ValueError("--samples carry their prompt: --text does not apply")

    def _check_hf_sampler(self) -> None:
        """transformers' generate: a model directory, statistically, with settings it has."""
        if not self.hugging_face or self.exact or self.mutant or self.samples is not None:
            raise ValueError(
                f"--sampler {self.sampler} audits transformers' generate on a model directory "
                f"(--target DIR), statistically, without --mutant or --samples"
            )
        check_hf_sampling(self.sampling)
        as_positive_int("assistant_tokens", self.assistant_tokens)
        if self.assistant_schedule not in SCHEDULES:
            raise ValueError(f"assistant_schedule must be one of {SCHEDULES}, got {self.assistant_schedule!r}")
        if not 0 <= self.assistant_confidence < 1:
            raise ValueError(f"assistant_confidence must be in [0, 1), got {self.assistant_confidence!r}")

    def _check_cross_vocabulary(self) -> None:
        """Our cross-vocabulary decoder on a real target, statistically (the exact audits of the tiny pairs are in
        the tests: docs/theory-vocabularies.md §15)."""
        if self.cross_vocabulary not in CROSS_METHODS:
            raise ValueError(f"cross_vocabulary must be one of {CROSS_METHODS}, got {self.cross_vocabulary!r}")
        if self.sampler != "ours":
            raise ValueError(
                f"--sampler {self.sampler} verifies a draft of another tokenizer by transformers' own method: drop "
                f"--cross-vocabulary"
            )
        if not self.hugging_face or self.decoder != "speculative" or self.exact or self.mutant or self.policy:
            raise ValueError(
                "--cross-vocabulary audits our speculative decoder on a real target (--target smollm2, a GGUF file "
                "or a model directory) statistically, without --exact, --mutant or --policy"
            )
        if self.sampling.uses_history:
            raise ValueError("--cross-vocabulary takes no penalty, grammar or Mirostat")

    def _check_tree(self) -> None:
        """The tree decoder: its shape, verifier and mutant (an exact enumeration's size is counted as it runs)."""
        tree_shape(self.tree)
        if self.verifier not in TREE_VERIFIERS:
            raise ValueError(
                f"--decoder tree takes --verifier {' | '.join(sorted(TREE_VERIFIERS))}, got {self.verifier!r}"
            )
        if self.mutant is not None:
            tree_mutants.tree_mutant(self.mutant)


def tree_shape(spec: str) -> Tree | DynamicTree:
    """A tree from ``chain:G``, ``kary:K:D``, ``parents:-1,0,0,1`` or ``dynamic:K:D:N`` (EAGLE-2: branching K,
    depth D, budget N nodes) (``--tree``)."""
    kind, _, rest = str(spec).partition(":")
    try:
        values = [int(v) for v in rest.split("," if kind == "parents" else ":")]
        if kind == "chain" and len(values) == 1:
            return Tree.chain(values[0])
        if kind == "kary" and len(values) == 2:
            return Tree.kary(*values)
        if kind == "dynamic" and len(values) == 3:
            return DynamicTree(*values)
        if kind == "parents":
            return Tree(tuple(values))
    except ValueError as error:
        raise ValueError(f"tree {spec!r}: {error}") from None
    raise ValueError(f"tree must be chain:G, kary:K:D, parents:-1,0,... or dynamic:K:D:N, got {spec!r}")
