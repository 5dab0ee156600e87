"""spectheory.blockwise against enumeration and Stern et al.'s model-call counts."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import seeds

from spectheory.blockwise import expected_block_size, model_calls


@given(seeds, st.integers(2, 8), st.data())
def test_expected_block_size_against_enumeration(seed, heads, data):
    accuracies = np.random.default_rng(seed).random(heads - 1)  # heads 2..k
    minimum = data.draw(st.integers(1, heads))
    total = 0.0
    for right in itertools.product([0, 1], repeat=heads - 1):
        probability = np.prod([a if r else 1 - a for a, r in zip(accuracies, right)])
        # head 1 always counts; heads 2..minimum are accepted regardless; then up to the first miss.
        run = next((i for i in range(minimum - 1, heads - 1) if not right[i]), heads - 1)
        total += probability * (1 + run)
    assert float(expected_block_size(accuracies, minimum)) == pytest.approx(total, rel=1e-12)


def test_block_size_limits():
    assert expected_block_size(np.ones(7)) == 8  # perfect heads: k tokens per step
    assert expected_block_size(np.zeros(7)) == 1  # useless heads: greedy decoding
    assert expected_block_size(np.zeros(7), min_block_size=3) == 3


def test_model_calls_against_stern_section_4():
    # Perfect heads with k = 4 on m = 100 tokens: 2m/k = 50 calls separately, m/k + 1 = 26 combined.
    assert model_calls(100, 4, combined=False) == 50
    assert model_calls(100, 4, combined=True) == 26
    assert model_calls(100, 1, combined=True) == 101  # block size 1: one more call than greedy


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: expected_block_size([0.5, 1.5]), r"^head_accuracies must be in \[0, 1\]"),
        (lambda: expected_block_size([0.5, 0.5], min_block_size=4), r"^min_block_size must be in \[1, 3\]"),
        (lambda: model_calls(100, 0.5, combined=True), r"^mean_block_size must be"),
        (lambda: model_calls(-1, 2, combined=True), r"^tokens must be"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
