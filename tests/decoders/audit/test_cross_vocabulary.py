"""Drafts with another tokenizer (decoders.cross_vocabulary, docs/theory-vocabularies.md §15): the exact law of every
method's whole runs on two hand-written vocabulary pairs against the target's own law, to 1e-9; each planted bug of
decoders.audit.cross_vocabulary fails the same audit alone; the tokenizers and the draft's rollback by string
position against hand-worked cases."""

import pytest
import torch

from decoders.audit.cross_vocabulary import CROSS_MUTANTS, PAIRS, cross_mutant, cross_vocabulary_law, tiny_cross_pair
from decoders.audit.exact import autoregressive_law, compare_laws, whole_run_law
from decoders.audit.verdict import TOLERANCE
from decoders.cross_vocabulary import CrossVocabularyConfig, follow_text, generate_cross_vocabulary
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.vocabulary import Vocabulary, shared_pieces
from spectheory.vocabularies import intersection_acceptance, string_acceptance

PROMPTS = {"split": [2], "merges": [0]}  # "a" in each target's vocabulary
#: (pair, method, gamma, horizon): several iterations per run, tokens split across them, at sizes whose branches
#: (up to ~2,000 a case) keep the file near half a minute
SETTINGS = [
    *[("split", method, gamma, horizon) for method in ("slem", "tli", "slrs") for gamma, horizon in ((1, 3), (2, 2))],
    ("merges", "slem", 1, 2),
    ("merges", "tli", 2, 2),
    ("merges", "slrs", 1, 3),
]


def _audit(pair_name: str, config: CrossVocabularyConfig, horizon: int, step=None):
    pair = tiny_cross_pair(pair_name)
    prompt = PROMPTS[pair_name]
    law, branches = cross_vocabulary_law(pair, prompt, config, horizon, *(() if step is None else (step,)))
    reference = autoregressive_law(pair[0], prompt, config.sampling, horizon)
    return compare_laws(law, reference, method=config.method, horizon=horizon, branches=branches)


@pytest.mark.parametrize("pair, method, gamma, horizon", SETTINGS)
def test_cross_vocabulary_law_against_autoregressive(pair, method, gamma, horizon):
    """Every method's whole runs, enumerated, give the target's law of the first target tokens exactly (T = 1)."""
    report = _audit(pair, CrossVocabularyConfig(method, gamma, Sampling(1.0)), horizon)
    assert report.passed and report.total_mass == pytest.approx(1.0, abs=TOLERANCE), report.as_dict()
    assert report.branches > 50  # the draws did branch: a run that never drew would pass trivially


@pytest.mark.parametrize("method", ["slem", "tli", "slrs"])
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_greedy_cross_vocabulary_against_autoregressive(pair, method):
    """At T = 0 every method emits the target's greedy tokens (one branch)."""
    report = _audit(pair, CrossVocabularyConfig(method, 2, Sampling(0.0)), 4)
    assert report.passed and report.sequences == 1, report.as_dict()


@pytest.mark.parametrize("name", [m.name for m in CROSS_MUTANTS])
def test_cross_vocabulary_mutant_against_its_exact_audit(name):
    """Each planted bug, alone, moves the law by far more than the tolerance on its pair."""
    mutant = cross_mutant(name)
    report = _audit(mutant.pair, CrossVocabularyConfig(mutant.method, 1, Sampling(1.0)), 3, mutant.step)
    assert not report.passed and report.max_abs_difference > 1e-3, report.as_dict()


def test_tokenizers_against_hand_worked_cases():
    """The merges pair tokenizes "aba" differently (b+a is the target's first merge); the split pair's target has
    three tokenizations of "aba" and spells it canonically by the longest piece."""
    target, draft = PAIRS["merges"]
    assert [target.pieces[t] for t in target.encode("aba")] == ["a", "ba"]
    assert [draft.pieces[t] for t in draft.encode("aba")] == ["ab", "a"]
    split, letters = PAIRS["split"]
    assert {"|".join(split.pieces[t] for t in ts) for ts in split.tokenizations("aba")} == {"a|b|a", "a|ba", "ab|a"}
    assert [split.pieces[t] for t in split.encode("abba")] == ["ab", "ba"]
    assert shared_pieces(letters, split) == {0: 2, 1: 4} and shared_pieces(draft, target) == {0: 0, 1: 1, 2: 2}


def test_follow_text_rolls_the_draft_back_by_string_position():
    """The draft keeps its tokens while their string is a prefix of the committed text, then spells the rest."""
    draft = Vocabulary(("a", "b", "ab"))
    assert follow_text(draft, [2, 0], "aba") == [2, 0]  # every token still fits: nothing re-spelled
    assert follow_text(draft, [0, 2, 1], "aba") == [0, 1, 0]  # a kept; ab does not fit at 1; "ba" spelled b|a
    assert follow_text(draft, [0, 1, 1], "aab") == [0, 2]  # a kept; b does not fit at 1; "ab" spelled whole
    assert follow_text(draft, [2], "abab") == [2, 2]  # the text ran past the draft's tokens


def test_generation_counts_its_calls_against_its_iterations():
    """A sampled run's stats: one target call per iteration, gamma draft calls per SLEM iteration, tokens as asked."""
    target, draft, target_vocabulary, draft_vocabulary = tiny_cross_pair("split")
    generation = generate_cross_vocabulary(
        target,
        draft,
        [[2], [0]],
        target_vocabulary=target_vocabulary,
        draft_vocabulary=draft_vocabulary,
        max_new_tokens=12,
        config=CrossVocabularyConfig("slem", 3, Sampling(1.0)),
        randomness=seeded(0),
    )
    stats = generation.stats
    assert [len(row) for row in generation.tokens] == [12, 12]
    assert stats.target_calls == sum(len(rows) for rows in stats.accepted_per_iteration)
    assert stats.draft_calls == 3 * stats.target_calls


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(method="slrx"), "method must be one of"),
        (dict(gamma=0), "gamma must be"),
        (dict(sampling=Sampling(1.0, repetition_penalty=1.2)), "takes no penalty"),
    ],
)
def test_bad_configs_name_themselves(change, message):
    with pytest.raises(ValueError, match=message):
        CrossVocabularyConfig(**{**dict(method="tli", gamma=2, sampling=Sampling(1.0)), **change})


def test_mismatched_vocabularies_are_refused():
    target, draft, target_vocabulary, _ = tiny_cross_pair("split")
    common = dict(max_new_tokens=2, config=CrossVocabularyConfig("tli", 1, Sampling(1.0)), randomness=seeded(0))
    with pytest.raises(ValueError, match="the draft's vocabulary holds 3 pieces but the draft model 2 tokens"):
        generate_cross_vocabulary(
            target,
            draft,
            [[2]],
            target_vocabulary=target_vocabulary,
            draft_vocabulary=Vocabulary(("a", "b", "c")),
            **common,
        )
    with pytest.raises(ValueError, match=r"cannot spell the target's characters \['b'\]"):
        generate_cross_vocabulary(
            target, draft, [[2]], target_vocabulary=target_vocabulary, draft_vocabulary=Vocabulary(("a", "c")), **common
        )
    with pytest.raises(ValueError, match="not a piece"):
        Vocabulary(("a", "b"), merges=(("a", "a"),))


def _first_acceptance_law(pair_name: str, method: str) -> dict:
    """The exact law of the first iteration's accepted count at gamma 1 (T = 1), by enumeration."""
    target, draft, target_vocabulary, draft_vocabulary = pair = tiny_cross_pair(pair_name)

    def run(randomness):
        generation = generate_cross_vocabulary(
            target,
            draft,
            [PROMPTS[pair_name]],
            target_vocabulary=target_vocabulary,
            draft_vocabulary=draft_vocabulary,
            max_new_tokens=1,
            config=CrossVocabularyConfig(method, 1, Sampling(1.0)),
            randomness=randomness,
        )
        return (generation.stats.accepted_per_iteration[0][0],)

    return whole_run_law(run)[0], pair


def _laws_after_prompt(pair, pair_name: str) -> tuple:
    """The target's law after the prompt and the draft's after its spelling of it, as numpy arrays."""
    target, draft, target_vocabulary, draft_vocabulary = pair
    p = target.forward(torch.tensor([PROMPTS[pair_name]]), target.new_state(1))[0, -1].softmax(-1)
    spelled = draft_vocabulary.encode(target_vocabulary.decode(PROMPTS[pair_name]))
    q = draft.forward(torch.tensor([spelled]), draft.new_state(1))[0, -1].softmax(-1)
    return p.numpy(), q.numpy()


@pytest.mark.parametrize("pair_name", sorted(PAIRS))
def test_tli_acceptance_against_theory(pair_name):
    """The enumerated probability that TLI accepts its first candidate is sum_x min(p(x), q'(x)) with q' the
    draft's law renormalised on the shared pieces (spectheory.vocabularies.intersection_acceptance)."""
    law, pair = _first_acceptance_law(pair_name, "tli")
    p, q = _laws_after_prompt(pair, pair_name)
    shared = shared_pieces(pair[3], pair[2])
    beta = intersection_acceptance(p, q, [shared.get(x, -1) for x in range(len(q))])
    assert law.get((1,), 0.0) == pytest.approx(float(beta), abs=1e-12)
    assert 0.05 < beta < 0.95  # neither certain nor impossible: the comparison can fail


@pytest.mark.parametrize("pair_name", sorted(PAIRS))
def test_slrs_acceptance_against_theory(pair_name):
    """The enumerated probability that SLRS accepts its first character is sum_c min(P(c), Q(c)), each law of the
    first character the mass of the tokens whose piece begins with it (spectheory.vocabularies.string_acceptance)."""
    law, pair = _first_acceptance_law(pair_name, "slrs")
    p, q = _laws_after_prompt(pair, pair_name)
    target_vocabulary, draft_vocabulary = pair[2], pair[3]
    first = [
        [sum(law_[t] for t, piece in enumerate(vocabulary.pieces) if piece[0] == c) for c in "ab"]
        for law_, vocabulary in ((p, target_vocabulary), (q, draft_vocabulary))
    ]
    beta = string_acceptance(*first)
    assert law.get((1,), 0.0) == pytest.approx(float(beta), abs=1e-12)
    assert 0.05 < beta < 0.999
