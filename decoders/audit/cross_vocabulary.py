"""Exact audits of the cross-vocabulary decoders (``decoders.cross_vocabulary``, docs/theory-vocabularies.md §15):
hand-written vocabulary pairs small enough to enumerate every draw of whole runs, and the planted bugs each audit
must catch, one per known pitfall.

The pairs: ``split``, a target over {ab, ba, a, bb, b} (ids out of the draft's order) drafted over {a, b}, so that
most target tokens are two draft tokens and every string has several target tokenizations; ``merges``, a target
whose BPE merges b+a before a+b drafted by one that merges a+b and b+b, so that the two tokenize "aba" differently
(a|ba against ab|a) and the draft holds a piece the target lacks (bb)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders.audit.exact import Law, whole_run_law
from decoders.cross_vocabulary import (
    REFERENCE_CROSS_STEP,
    CrossVocabularyConfig,
    CrossVocabularyStep,
    StringLaw,
    generate_cross_vocabulary,
)
from decoders.models.history import TabularModel
from decoders.sampling import adjusted_probs
from decoders.vocabulary import Vocabulary

__all__ = ["PAIRS", "tiny_cross_pair", "cross_vocabulary_law", "CrossMutant", "CROSS_MUTANTS", "cross_mutant"]

PAIRS = {
    "split": (Vocabulary(("ab", "ba", "a", "bb", "b")), Vocabulary(("a", "b"))),
    "merges": (
        Vocabulary(("a", "b", "ab", "ba"), merges=(("b", "a"), ("a", "b"))),
        Vocabulary(("a", "b", "ab", "bb"), merges=(("a", "b"), ("b", "b"))),
    ),
}


def tiny_cross_pair(name: str, seed: int = 0) -> tuple:
    """(target, draft, target vocabulary, draft vocabulary): an order-2 table over the target's pieces and an order-1
    table over the draft's, seeded, in float64."""
    if name not in PAIRS:
        raise ValueError(f"pair must be one of {sorted(PAIRS)}, got {name!r}")
    target_vocabulary, draft_vocabulary = PAIRS[name]
    target = TabularModel.random(torch.Generator().manual_seed(seed), target_vocabulary.size, 2, dtype=torch.float64)
    draft = TabularModel.random(torch.Generator().manual_seed(seed + 1), draft_vocabulary.size, 1, dtype=torch.float64)
    return target, draft, target_vocabulary, draft_vocabulary


def cross_vocabulary_law(
    pair: tuple,
    prompt: list,
    config: CrossVocabularyConfig,
    horizon: int,
    step: CrossVocabularyStep = REFERENCE_CROSS_STEP,
) -> tuple[Law, int]:
    """The exact law of the first ``horizon`` target tokens, over whole runs (rollback between iterations included)."""
    target, draft, target_vocabulary, draft_vocabulary = pair

    def run(randomness) -> tuple:
        generation = generate_cross_vocabulary(
            target,
            draft,
            [prompt],
            target_vocabulary=target_vocabulary,
            draft_vocabulary=draft_vocabulary,
            max_new_tokens=horizon,
            config=config,
            randomness=randomness,
            step=step,
        )
        return generation.tokens[0]

    return whole_run_law(run)


class RetokenizedCommit(CrossVocabularyStep):
    """The committed text re-tokenized canonically after each iteration: a target token split across two
    iterations (a, then b) is committed as the one token of their string (ab)."""

    def commit(self, target_vocabulary: Vocabulary, committed: list, emitted: list) -> list:
        return list(target_vocabulary.encode(target_vocabulary.decode(committed + emitted)))


class UnnormalisedIntersection(CrossVocabularyStep):
    """The accept test's q is the draft's full law on the shared pieces, not renormalised there (the draft samples
    from the renormalised one)."""

    @staticmethod
    def in_target_vocabulary(q, shared, logits, target_size, sampling):

        full = adjusted_probs(logits, sampling)
        return CrossVocabularyStep.in_target_vocabulary(full, shared, logits, target_size, sampling)


class MappedById(CrossVocabularyStep):
    """A draft token read as the target token of the same id, not of the same string."""

    @staticmethod
    def target_id(draft_token: int, shared: dict) -> int:
        return draft_token


class ResidualOverDraftVocabulary(CrossVocabularyStep):
    """After a rejection the residual max(0, p - q) is kept only on the target tokens the draft also holds."""

    @staticmethod
    def residual(p, q, accepted, proposed, shared):
        law = CrossVocabularyStep.residual(p, q, accepted, proposed, shared)
        mask = torch.zeros(law.shape[-1], dtype=torch.bool, device=law.device)
        mask[list(shared.values())] = True
        kept = law * mask
        return torch.where(kept.sum(dim=-1, keepdim=True) > 0, kept, law)  # nothing left there: the full residual


class NoTokenAcrossTheBoundary(CrossVocabularyStep):
    """SLRS's tokens of the accepted string end at its end: a target token that runs past it (split across two
    iterations) is never drawn."""

    def cover(self, strings: StringLaw, text: str, randomness) -> list:
        tokens = ()
        while text:
            law = strings.next_law(tokens)
            weights = torch.zeros(strings.vocabulary.size, dtype=torch.float64)
            for token, piece in enumerate(strings.vocabulary.pieces):
                if text.startswith(piece):
                    weights[token] = law[token] * strings.prefix_probability(text[len(piece) :], tokens + (token,))
            token = int(randomness.categorical(weights[None])[0])
            tokens, text = tokens + (token,), text[len(strings.vocabulary.pieces[token]) :]
        return list(tokens)


class CanonicalStringLaw(CrossVocabularyStep):
    """SLRS's target law of a string from its canonical tokenization alone, not summed over every tokenization."""

    def character_law(self, strings: StringLaw, prefix: str, alphabet: list) -> torch.Tensor:
        def canonical(text: str) -> torch.Tensor:
            probability, tokens = torch.ones((), dtype=torch.float64), ()
            for token in strings.vocabulary.encode(text) if text else ():
                probability, tokens = probability * strings.next_law(tokens)[token], tokens + (token,)
            return probability

        joint = torch.stack([canonical(prefix + c) for c in alphabet])
        return joint / joint.sum() if joint.sum() > 0 else strings.character_law(prefix, alphabet)


@dataclass(frozen=True)
class CrossMutant:
    """A planted bug of ``method``, run by ``step``; ``pair`` (of ``PAIRS``) shows it (ids in the same order hide a
    map by id; a draft whose pieces are all the target's hides a missing renormalisation)."""

    name: str
    bug: str
    method: str
    step: CrossVocabularyStep
    pair: str = "split"


CROSS_MUTANTS = (
    CrossMutant(
        "retokenized-commit",
        "the committed text is re-tokenized by the target after each iteration (a split token merges)",
        "slem",
        RetokenizedCommit(),
    ),
    CrossMutant(
        "intersection-not-renormalised",
        "the accept test's q is not renormalised on the shared pieces",
        "tli",
        UnnormalisedIntersection(),
        "merges",
    ),
    CrossMutant(
        "mapped-by-id", "a draft token is read as the target token of its id, not of its string", "tli", MappedById()
    ),
    CrossMutant(
        "residual-over-draft-vocabulary",
        "the residual is kept only on the target tokens the draft also holds",
        "tli",
        ResidualOverDraftVocabulary(),
    ),
    CrossMutant(
        "no-token-across-the-boundary",
        "SLRS never draws a target token that runs past the accepted string",
        "slrs",
        NoTokenAcrossTheBoundary(),
    ),
    CrossMutant(
        "canonical-string-law",
        "SLRS's target law of a string comes from its canonical tokenization alone",
        "slrs",
        CanonicalStringLaw(),
    ),
)


def cross_mutant(name: str) -> CrossMutant:
    """The cross-vocabulary mutant called ``name``; a ValueError lists the names otherwise."""
    for candidate in CROSS_MUTANTS:
        if candidate.name == name:
            return candidate
    raise ValueError(f"mutant must be one of {[m.name for m in CROSS_MUTANTS]}, got {name!r}")
