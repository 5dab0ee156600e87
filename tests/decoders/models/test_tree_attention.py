"""Tree attention (docs/theory-trees.md §12) against fresh forwards: every node of a draft tree scored in one call
(or level by level) has the logits of its root-to-node path run on its own, and after ``commit_path`` the
cache continues exactly as if the accepted path had been fed as a chain."""

import pytest
import torch
from tiny_hf import tiny_hf_model

from decoders.models.history import CopyDraft, SparseNGramModel, TabularModel
from decoders.models.tinygpt import TinyGPT, TinyGPTConfig

V = 24
PARENTS = [-1, 0, 0, 1, 1, 2, 3, 3, 6]  # node 0 is the last committed token


def tinygpt():
    torch.manual_seed(3)  # initialisation only
    return TinyGPT(TinyGPTConfig(V, d_model=32, n_layer=2, n_head=4, max_context=64)).eval()


def paths(parents):
    out = []
    for node in range(len(parents)):
        path, at = [], node
        while at >= 0:
            path.append(at)
            at = parents[at]
        out.append(path[::-1])
    return out


def fresh(model, tokens):
    """Logits of the last token of ``tokens`` (a list), from an empty cache."""
    with torch.no_grad():
        return model.forward(torch.tensor([tokens]), model.new_state(1, len(tokens)))[0, -1]


def models():
    yield "tinygpt", tinygpt()
    yield "tabular-trigram", TabularModel.random(torch.Generator().manual_seed(4), V, 2)
    yield "sparse-ngram", SparseNGramModel.fit([1, 2, 3, 4, 5, 1, 2, 6, 7, 3, 4, 8] * 3, V, 3)
    yield "copy", CopyDraft(V, min_match=1, max_match=3)
    for kind in ("gpt2", "llama"):
        for attention in ("sdpa", "eager"):
            yield f"hf-{kind}-{attention}", tiny_hf_model(kind, attention, vocab=V)


@pytest.mark.parametrize("name, model", list(models()), ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("levels", (False, True))
def test_tree_logits_against_fresh_path_forwards(name, model, levels):
    generator = torch.Generator().manual_seed(0)
    prefixes = [[1, 2, 3, 4, 5], [6, 7]]
    nodes = torch.randint(0, V, (2, len(PARENTS)), generator=generator)
    with torch.no_grad():
        state = model.new_state(2, 32)
        lengths = torch.tensor([len(p) for p in prefixes])
        padded = torch.tensor([p + [0] * (5 - len(p)) for p in prefixes])
        model.forward(padded, state, lengths)
        parents = torch.tensor(PARENTS).expand(2, -1)
        if levels:  # one call per depth, as a drafter grows the tree
            depth = [len(path) - 1 for path in paths(PARENTS)]
            logits = torch.cat(
                [
                    model.forward_tree(
                        nodes[:, [i for i in range(len(PARENTS)) if depth[i] == d]],
                        state,
                        parents[:, [i for i in range(len(PARENTS)) if depth[i] == d]],
                    )
                    for d in range(max(depth) + 1)
                ],
                dim=1,
            )
        else:
            logits = model.forward_tree(nodes, state, parents)
        for b, prefix in enumerate(prefixes):
            for node, path in enumerate(paths(PARENTS)):
                torch.testing.assert_close(
                    logits[b, node], fresh(model, prefix + nodes[b, path].tolist()), atol=1e-5, rtol=1e-5
                )


@pytest.mark.parametrize("name, model", list(models()), ids=lambda x: x if isinstance(x, str) else "")
def test_commit_path_against_chain_forward(name, model):
    """Rows keep different paths (3 and 1 nodes); the next ordinary forward sees prefix + path."""
    prefixes = [[1, 2, 3], [4, 5, 6]]
    nodes = torch.randint(0, V, (2, len(PARENTS)), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        state = model.new_state(2, 32)
        model.forward(torch.tensor(prefixes), state)
        model.forward_tree(nodes, state, torch.tensor(PARENTS).expand(2, -1))
        kept = torch.tensor([[0, 1, 3], [0, 2, 5]])
        counts = torch.tensor([3, 1])
        model.commit_path(state, kept, counts)
        assert state.lengths.tolist() == [6, 4] and state.tree is None
        step = torch.tensor([[7], [8]])
        logits = model.forward(step, state)[:, 0]
    for b in range(2):
        history = prefixes[b] + nodes[b, kept[b, : counts[b]]].tolist() + [step[b, 0].item()]
        torch.testing.assert_close(logits[b], fresh(model, history), atol=1e-5, rtol=1e-5)


def test_tree_parents_must_point_back():
    model = tinygpt()
    state = model.new_state(1, 16)
    with pytest.raises(ValueError, match=r"parents of new node 1 must be in \[-1, 1\)"):
        model.forward_tree(torch.tensor([[1, 2]]), state, torch.tensor([[-1, 1]]))


@pytest.mark.parametrize("name, model", list(models()), ids=lambda x: x if isinstance(x, str) else "")
def test_append_against_forward(name, model):
    """A prefill through ``append`` (no LM head, where a model has it) leaves the cache ``forward`` leaves: the
    next call's logits agree within 1e-5, over ragged rows."""
    prefix = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 0, 0, 0]])
    lengths, following = torch.tensor([5, 2]), torch.tensor([[8, 9], [10, 11]])
    logits = []
    for prefill in (model.forward, model.append):
        with torch.no_grad():
            state = model.new_state(2, 16)
            prefill(prefix, state, lengths)
            assert state.lengths.tolist() == [5, 2]
            logits.append(model.forward(following, state))
    torch.testing.assert_close(logits[1], logits[0], atol=1e-5, rtol=0, equal_nan=True)
