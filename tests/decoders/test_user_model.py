"""A user's model written to the documented protocol and nothing more (``decoders.models.protocol.CausalModel``:
no ``append``, no ``state.repeat``, no tree attention) through every entry that takes a model object: the
decoders, the exact audit and the statistical audit, each against the reference it is tested with elsewhere;
the optional capabilities fall back, and what a decoder needs that the model lacks is one ValueError line."""

import pytest
import torch

from decoders.audit import setups, statistical
from decoders.audit.exact import autoregressive_law, compare_laws, speculative_law
from decoders.autoregressive import generate_autoregressive
from decoders.randomness import seeded
from decoders.sampling import GREEDY, Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import TreeConfig, generate_tree
from spectheory.trees import Tree

VOCAB = 4


class UserState:
    """Each row's tokens, in Python lists: all the protocol asks of a state is ``lengths`` and ``clone``."""

    def __init__(self, rows: list) -> None:
        self.rows = rows
        self.lengths = torch.tensor([len(row) for row in rows], dtype=torch.int64)

    def clone(self) -> "UserState":
        return UserState([list(row) for row in self.rows])


class UserBigram:
    """Logits of the next token from the current one (a [V, V] table), written to the protocol alone."""

    def __init__(self, seed: int) -> None:
        self.table = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        self.vocab_size, self.max_context, self.device = VOCAB, None, torch.device("cpu")

    def new_state(self, batch_size: int, capacity: int | None = None) -> UserState:
        return UserState([[] for _ in range(batch_size)])

    def forward(self, tokens, state, counts=None, keep=0):
        counts = [tokens.shape[1]] * len(state.rows) if counts is None else counts.tolist()
        for row, new, count in zip(state.rows, tokens.tolist(), counts):
            row.extend(new[:count])
        state.lengths = torch.tensor([len(row) for row in state.rows], dtype=torch.int64)
        logits = self.table[tokens]  # [B, S, V]
        return logits[:, -keep:] if keep else logits

    def truncate(self, state, lengths) -> None:
        state.rows = [row[:n] for row, n in zip(state.rows, lengths.tolist())]
        state.lengths = torch.tensor([len(row) for row in state.rows], dtype=torch.int64)


PROMPTS = [[1, 2, 3], [0], [3, 3]]


def test_user_model_greedy_speculative_against_autoregressive():
    target, draft = UserBigram(0), UserBigram(1)
    reference = generate_autoregressive(target, PROMPTS, max_new_tokens=12, sampling=GREEDY, randomness=seeded(0))
    speculative = generate_speculative(
        target, draft, PROMPTS, max_new_tokens=12, config=SpeculativeConfig(3, GREEDY), randomness=seeded(0)
    )
    assert speculative.tokens == reference.tokens


def test_user_model_exact_law_against_target():
    target, draft = UserBigram(0), UserBigram(1)
    config = SpeculativeConfig(2, Sampling(1.0))
    law, branches = speculative_law(target, draft, [1, 2], config, 3, progress=False)
    report = compare_laws(
        law, autoregressive_law(target, [1, 2], config.sampling, 3), method="dp", horizon=3, branches=branches
    )
    assert report.max_abs_difference < 1e-12 and report.sequences == VOCAB**3


def test_conditionals_without_repeat_against_repeat():
    """The statistical audit's conditionals: scoring the prompt again per row (no ``repeat``) gives what repeating
    its one-row state gives (the model with ``repeat`` added)."""

    class WithRepeat(UserBigram):
        def new_state(self, batch_size, capacity=None):
            state = super().new_state(batch_size, capacity)
            state.repeat = lambda rows: UserState([list(state.rows[0]) for _ in range(rows)])
            return state

    continuations = torch.randint(0, VOCAB, (6, 3), generator=torch.Generator().manual_seed(0))
    plain = statistical.conditionals(UserBigram(0), [1, 2, 3], continuations, Sampling(1.0))
    fast = statistical.conditionals(WithRepeat(0), [1, 2, 3], continuations, Sampling(1.0))
    assert torch.equal(plain, fast)


def test_user_model_statistical_audit_against_target():
    """Speculative decoding of the user's pair passes the statistical audit (level 0.01: a correct sampler fails
    with probability 0.01; its negative controls are in test_audit.py)."""
    target, draft = UserBigram(0), UserBigram(1)
    config = SpeculativeConfig(2, Sampling(1.0))
    sample = setups.sampler(
        setups.speculative_run(target, draft, [1, 2], config, 3), [1, 2], 3, batch=500, progress=False
    )
    report = statistical.audit_sampler(sample, target, [1, 2], config.sampling, n=2000, horizon=3, seed=0, draft=draft)
    assert report.passed, report.p_value


def test_tree_decoder_names_what_a_user_model_lacks():
    with pytest.raises(
        ValueError,
        match=r"the target UserBigram lacks forward_tree, commit_path: a decoder needs "
        r"tree attention",
    ):
        generate_tree(
            UserBigram(0),
            UserBigram(1),
            PROMPTS,
            max_new_tokens=4,
            config=TreeConfig(Tree.chain(2), GREEDY),
            randomness=seeded(0),
        )


def test_missing_required_method_is_one_line():
    model = type("NoTruncate", (), {k: v for k, v in vars(UserBigram).items() if k != "truncate"})(0)
    with pytest.raises(ValueError, match=r"^the draft NoTruncate lacks truncate: a decoder needs the model protocol"):
        generate_speculative(
            UserBigram(0), model, PROMPTS, max_new_tokens=4, config=SpeculativeConfig(2, GREEDY), randomness=seeded(0)
        )
