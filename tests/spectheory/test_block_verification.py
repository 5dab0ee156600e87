"""spectheory.block_verification against the positional closed form, the target law, and token verification."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import random_pair, seeds

from spectheory.acceptance import acceptance_probability
from spectheory.block_verification import (
    MAX_BLOCKS,
    accepted_length_distribution,
    accepted_length_given_block,
    draft_blocks,
    expected_accepted_tokens,
)
from spectheory.positional import expected_tokens_positional

small = st.tuples(seeds, st.integers(1, 4), st.integers(2, 4))  # seed, gamma, V


@given(small)
def test_token_verification_against_positional_closed_form(case):
    seed, gamma, vocabulary = case
    target, draft = random_pair(seed, vocabulary, batch=(gamma,))
    closed = float(expected_tokens_positional(acceptance_probability(target, draft))) - 1
    assert expected_accepted_tokens(target, draft, verifier="token") == pytest.approx(closed, abs=1e-12)


@given(small)
def test_block_verification_never_below_token_verification(case):
    seed, gamma, vocabulary = case
    target, draft = random_pair(seed, vocabulary, batch=(gamma,))
    token = expected_accepted_tokens(target, draft, verifier="token")
    block = expected_accepted_tokens(target, draft, verifier="block")
    assert block >= token - 1e-12, f"seed={seed} gamma={gamma} V={vocabulary}: block {block} < token {token}"
    if gamma == 1:  # one draft token: both verifiers are the same test
        assert block == pytest.approx(token, abs=1e-12)
    for verifier in ("token", "block"):
        law = accepted_length_distribution(target, draft, verifier=verifier)
        assert np.all(law >= -1e-15) and law.sum() == pytest.approx(1.0, abs=1e-12)


def test_block_verification_gains_on_a_known_case():
    # Q over-proposes token 0 at both positions; the block verifier recovers part of the loss.
    target = np.array([[0.5, 0.5], [0.5, 0.5]])
    draft = np.array([[0.9, 0.1], [0.1, 0.9]])
    token = expected_accepted_tokens(target, draft, verifier="token")
    block = expected_accepted_tokens(target, draft, verifier="block")
    assert token == pytest.approx(0.6 + 0.36)
    assert block > token + 0.01


def test_identical_models_accept_everything():
    target = np.array([[0.2, 0.3, 0.5]] * 3)
    for verifier in ("token", "block"):
        assert expected_accepted_tokens(target, target, verifier=verifier) == pytest.approx(3.0)


def first_two_tokens_law(target, draft, *, weighted_residual=True):
    """The law of the first two emitted tokens with block verification at gamma = 2.

    tau = 2: (x1, x2); tau = 1: (x1, y), y ~ norm(max(0, p_1 P_2 - Q_2)); tau = 0: y ~ norm(max(0, P_1 -
    Q_1)) and the next iteration's first token, whose law is P_2 (checked by the tau = 0 branch at gamma = 1).
    ``weighted_residual=False`` is the negative control: residual norm(max(0, P_2 - Q_2)) without p_1.
    """
    blocks, probability = draft_blocks(target, draft)
    law = accepted_length_given_block(target, draft, blocks, verifier="block")
    joint = np.zeros((target.shape[1],) * 2)
    first_residual = np.maximum(0, target[0] - draft[0])
    for (x1, x2), weight, tau in zip(blocks, probability, law):
        if first_residual.sum() > 0:
            joint += weight * tau[0] * np.outer(first_residual / first_residual.sum(), target[1])
        path = min(1.0, target[0, x1] / draft[0, x1]) if weighted_residual else 1.0
        second_residual = np.maximum(0, path * target[1] - draft[1])
        if tau[1] > 0:
            joint[x1] += weight * tau[1] * second_residual / second_residual.sum()
        joint[x1, x2] += weight * tau[2]
    return joint


def test_block_verification_preserves_target_law_with_negative_control():
    """Sun et al.'s claim, exactly: the first two emitted tokens follow P_1 x P_2 (to 1e-12) for 40 random
    pairs over V = 5. Negative control: the residual without the weight p_1 (a plausible bug) deviates by
    more than 1e-4 on 33 of them; it coincides with the right law only where norm(max(0, p_1 P_2 - Q_2))
    has a single token, which normalising makes independent of p_1."""
    caught = 0
    for seed in range(40):
        target, draft = random_pair(seed, 5, batch=(2,), sparse=False)
        assert np.allclose(first_two_tokens_law(target, draft), np.outer(target[0], target[1]), atol=1e-12), seed
        wrong = first_two_tokens_law(target, draft, weighted_residual=False)
        caught += np.abs(wrong - np.outer(target[0], target[1])).max() > 1e-4
    assert caught == 33, caught


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: expected_accepted_tokens(np.full((2, 3), 1 / 3), np.full((2, 3), 1 / 3), verifier="tree"),
            r"^verifier must be one of",
        ),
        (
            lambda: expected_accepted_tokens(np.full((21, 2), 0.5), np.full((21, 2), 0.5), verifier="token"),
            rf"draft blocks exceed MAX_BLOCKS = {MAX_BLOCKS}",
        ),
        (
            lambda: expected_accepted_tokens(np.full(3, 1 / 3), np.full(3, 1 / 3), verifier="token"),
            r"^target and draft must have shape \(gamma, V\)",
        ),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
