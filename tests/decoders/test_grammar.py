"""Grammar-constrained decoding (docs/theory-sampling.md §14): xgrammar's masks against Python's own regular expressions
by enumeration, the masks along a path against the masks of each prefix, and the error contract."""

import itertools
import re

import pytest
import torch
from command import run

from decoders.grammar import Grammar, GrammarSpec, token_texts
from decoders.sampling import History, Sampling, adjusted_probs

LETTERS = "abc"  # V = 4: tokens 0-2 are letters, token 3 ends the row
STOP = 3


def _allowed_by_enumeration(pattern: str, prefix: str, longest: int) -> set:
    """The tokens that keep ``prefix`` a prefix of the language, by trying every completion up to ``longest``
    letters (``re.fullmatch``); the stop token where ``prefix`` is itself in the language."""
    allowed = {STOP} if re.fullmatch(pattern, prefix) else set()
    for token, letter in enumerate(LETTERS):
        if any(
            re.fullmatch(pattern, prefix + letter + "".join(rest))
            for length in range(longest + 1)
            for rest in itertools.product(LETTERS, repeat=length)
        ):
            allowed.add(token)
    return allowed


@pytest.mark.parametrize("pattern", ["(ab|ba)+", "a*c?b{1,2}", "(abc)+|c"])
def test_grammar_masks_against_regex_enumeration(pattern):
    """Every prefix in the language's prefix closure up to 4 letters: xgrammar's mask equals the enumeration's
    (completions up to 5 letters suffice for these patterns); after a complete output and its stop token, only stop
    tokens."""
    grammar = Grammar("regex", pattern, list(LETTERS) + ["<stop>"], 4, (STOP,))
    checked = 0
    for length in range(5):
        for prefix in itertools.product(range(3), repeat=length):
            text = "".join(LETTERS[token] for token in prefix)
            if not _allowed_by_enumeration(pattern, text, 5) and length:
                continue  # not a prefix of the language: no decoder reaches it
            expected = _allowed_by_enumeration(pattern, text, 5)
            assert set(grammar.allowed(prefix).nonzero()[:, 0].tolist()) == expected, (pattern, text)
            checked += 1
            if STOP in expected:
                assert grammar.allowed(prefix + (STOP,)).tolist() == [False, False, False, True]
    assert checked >= 5


def test_history_along_masks_against_each_prefix():
    """History.along's masks at each position of a path equal History.of's for the prefix up to it, in any order of
    asking (the matcher rolls back), and the masked law is the target's law renormalised over the allowed tokens."""
    grammar = Grammar("regex", "(ab|ba)+", token_texts(4), 4, (STOP,))
    rows, path = [[1, 0], [0, 0, 1]], torch.tensor([[0, 1, 3], [1, 0, 1]])  # prompts end where the output starts
    history = History.of(rows, 4, "cpu", [1, 2], grammar)  # outputs (0,) and (0, 1)
    along = history.along(path)  # [2, 4, 4]
    for b, i in itertools.product(range(2), range(4)):
        prefix = History.of([rows[b] + path[b, :i].tolist()], 4, "cpu", [[1, 2][b] + i], grammar)
        assert torch.equal(along.allowed[b, i], prefix.allowed[0]), (b, i)
    logits = torch.tensor([[0.5, 1.0, -0.3, 0.2]], dtype=torch.float64)
    after_a = History.of([[1, 0]], 4, "cpu", [1], grammar)  # output "a": only "b" continues (ab|ba)+
    probs = adjusted_probs(logits, Sampling(1.0, stop=(STOP,), grammar=grammar), history=after_a)
    expected = torch.softmax(logits, -1) * torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    assert torch.allclose(probs, expected / expected.sum())


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--exact", "--regex", "(ab)+"], "--regex needs a stop token (--stop)"),
        (["--exact", "--regex", "[ab", "--stop", "4"], "the regex does not compile: Regex parsing error at position 4"),
        (["--exact", "--regex", "a", "--json-schema", "x.json", "--stop", "4"], "not allowed with argument"),
        (["--exact", "--grammar", "/nonexistent.ebnf", "--stop", "4"], "--grammar /nonexistent.ebnf: cannot be read"),
        (
            ["--exact", "--regex", "a", "--stop", "4", "--vocabulary", "30", "--horizon", "2"],
            "a vocabulary of at most 26 tokens",
        ),
        (["--engine", "llama-cpp", "--regex", "a", "--stop", "2"], "--stop and the grammar"),
    ],
)
def test_grammar_flags_against_error_contract(argv, fragment, capsys):
    """One line on stderr, exit 2, before any work."""
    status, out, err = run(capsys, "audit", *argv)
    assert status == 2 and err.count("\n") == 1 and fragment in err, err


def test_grammar_spec_needs_binding_before_decoding():
    """An unbound GrammarSpec reaching a History is an error that says to bind it (Sampling.bound)."""
    sampling = Sampling(1.0, stop=(2,), grammar=GrammarSpec("regex", "a+"))
    with pytest.raises(ValueError, match="compiled for the model's vocabulary first"):
        History.of([[0]], 3, "cpu", None, sampling.grammar)
    assert sampling.bound(None, 3).grammar.allowed(()).tolist() == [True, False, False]


def test_grammar_dead_end_against_its_message():
    """A grammar that needs a character no token has ("d" after "b", V = 3) stops with its own error, not a NaN law."""
    grammar = Grammar("regex", "(a|bd)+", token_texts(3), 3, (2,))
    assert grammar.allowed(()).tolist() == [True, True, False]
    with pytest.raises(ValueError, match=r"allows no token after the output \[1\]: a dead end"):
        grammar.allowed((1,))


def test_unpacked_bitmask_against_bit_arithmetic():
    """Bit j of word i of xgrammar's int32 bitmask is token 32 i + j, negative words (bit 31 set) included."""
    from decoders.grammar import _unpacked

    words = torch.randint(-(2**31), 2**31 - 1, (5,), generator=torch.Generator().manual_seed(0), dtype=torch.int64)
    packed = words.to(torch.int32)
    expected = [bool((int(words[i]) >> j) & 1) for i in range(5) for j in range(32)][:150]
    assert _unpacked(packed, 150).tolist() == expected
