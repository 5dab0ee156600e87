"""The compiled, static-cache path (decoders.models.compiled; docs/gpu.md) against the eager adapter: its logits,
greedy tokens and exact laws (every chain and tree verifier, the sampling parameters engines ship) equal the eager
path's, the planted mutants still fail on it, and what a CUDA graph would capture is one graph with no host read.

The models are tiny random float64 Hugging Face Llama and GPT-2 models with peaked conditionals, compiled with the
``eager`` backend: dynamo traces each call shape into one graph (``fullgraph``) in seconds, without inductor's code
generation; the graph is what inductor and CUDA graphs would compile and replay (``test_inductor_chain_against_eager``,
slow, runs inductor itself). Exact laws are compared to 1e-9 (float64 enumerations: no false positives); a mutant
counts as caught above 1e-6."""

import pytest
import torch
from tiny_hf import tiny_hf_model

from decoders.audit.exact import autoregressive_law, compare_laws, speculative_law, tree_law
from decoders.audit.mutants import MUTANTS
from decoders.audit.tree_mutants import TREE_MUTANTS
from decoders.autoregressive import generate_autoregressive
from decoders.randomness import seeded
from decoders.sampling import GREEDY, Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import DynamicTree, TreeConfig, generate_tree
from spectheory.multidraft import TREE_RULES
from spectheory.trees import Tree

transformers = pytest.importorskip("transformers")

PROMPT = [1, 2]
CAUGHT = 1e-6
SAMPLINGS = {
    "T=1": Sampling(1.0),
    "T=0.7": Sampling(0.7),
    "top-k-2": Sampling(1.0, top_k=2),
    "top-p-0.8": Sampling(1.0, top_p=0.8),
    "greedy": GREEDY,
    "all-at-T=0.8": Sampling(
        0.8,
        top_k=3,
        top_p=0.97,
        min_p=0.05,
        repetition_penalty=1.3,
        frequency_penalty=0.4,
        presence_penalty=0.2,
        logit_bias=((1, 0.5),),
    ),
    "stop+temperature": Sampling(0.8, stop=(3,)),
}  # ids without spaces: node ids pass through shells


def peaked(kind: str, vocab: int, seed: int = 7):
    """A tiny float64 model of ``kind`` whose embeddings and head are scaled up: peaked, varied conditionals (a
    fresh one's are nearly uniform, under which many bugs move no mass)."""
    adapter = tiny_hf_model(kind, vocab=vocab, seed=seed)
    with torch.no_grad():
        weights = (adapter.model.get_input_embeddings().weight, adapter.model.get_output_embeddings().weight)
        for weight in {w.data_ptr(): w for w in weights}.values():  # once where the two are tied (GPT-2)
            weight.mul_(15.0)
    adapter.model.to(torch.float64)
    return type(adapter)(adapter.model)


@pytest.fixture(scope="module")
def pair():
    """(eager target, eager draft, compiled target, compiled draft) at V = 4: a Llama target, a GPT-2 draft."""
    target, draft = peaked("llama", 4), peaked("gpt2", 4, seed=8)
    return target, draft, target.compiled(backend="eager"), draft.compiled(backend="eager")


def exact(law_and_branches, target, sampling, horizon):
    law, branches = law_and_branches
    return compare_laws(
        law,
        autoregressive_law(target, PROMPT, sampling, horizon),
        method="prefix-dp",
        horizon=horizon,
        branches=branches,
    )


def test_compiled_logits_against_eager(pair):
    """Causal calls, a rollback and a tree call: the same logits as the eager adapter (float64, 1e-12), though the
    compiled calls attend over every slot of the static cache."""
    target, _, compiled, _ = pair
    calls = [
        ("forward", torch.tensor([[1, 2, 3], [2, 0, 1]]), None),
        ("forward", torch.tensor([[3, 1], [0, 2]]), None),
        ("truncate", torch.tensor([4, 3]), None),
        ("forward", torch.tensor([[1], [3]]), None),
        ("forward_tree", torch.tensor([[1, 2, 3], [0, 1, 2]]), torch.tensor([[-1, 0, 0], [-1, 0, 1]])),
    ]
    states = [model.new_state(2, 16) for model in (target, compiled)]
    with torch.no_grad():
        for name, tokens, parents in calls:
            outputs = [
                model.truncate(state, tokens)
                if name == "truncate"
                else getattr(model, name)(tokens, state, *(() if parents is None else (parents,)))
                for model, state in zip((target, compiled), states)
            ]
            if name != "truncate":
                torch.testing.assert_close(outputs[1], outputs[0], atol=1e-12, rtol=0)
    assert {width for _, width, _ in compiled.compiled_shapes} == {1, 2, 3}  # the first call (a prompt) ran eagerly


def test_static_cache_is_allocated_once(pair):
    """A rollback moves the rows' lengths only: the same buffers before and after a whole chain run."""
    _, _, compiled, _ = pair
    state = compiled.new_state(1, 12)
    buffers = [buffer.data_ptr() for buffer in state.cache.keys + state.cache.values]
    with torch.no_grad():
        compiled.forward(torch.tensor([[1, 2, 3]]), state)
        compiled.truncate(state, torch.tensor([1]))
        compiled.forward(torch.tensor([[3, 0]]), state)
        with pytest.raises(ValueError, match="capacity of 12"):
            compiled.forward(torch.tensor([[1] * 10]), state)
    assert [buffer.data_ptr() for buffer in state.cache.keys + state.cache.values] == buffers


@pytest.fixture(scope="module")
def wide_pair():
    """(eager target, eager draft, compiled target, compiled draft) at V = 24, compiled once for the module's tests."""
    target, draft = peaked("llama", 24), peaked("gpt2", 24, seed=8)
    return target, draft, target.compiled(backend="eager"), draft.compiled(backend="eager")


@pytest.mark.parametrize("decoder", ("autoregressive", "chain", "tree", "dynamic"))
def test_greedy_compiled_against_eager(wide_pair, decoder):
    """Batches of prompts of different lengths, 16 tokens: the compiled pair gives the eager pair's tokens."""
    prompts = [[1, 2, 3, 4], [5, 6], [7, 8, 9]]
    outputs = []
    for t, d in (wide_pair[:2], wide_pair[2:]):
        options = {"max_new_tokens": 16, "randomness": seeded(0)}
        if decoder == "autoregressive":
            outputs.append(generate_autoregressive(t, prompts, sampling=GREEDY, **options).tokens)
        elif decoder == "chain":
            outputs.append(generate_speculative(t, d, prompts, config=SpeculativeConfig(3, GREEDY), **options).tokens)
        else:
            tree = DynamicTree(2, 3, 6) if decoder == "dynamic" else Tree.kary(2, 2)
            outputs.append(generate_tree(t, d, prompts, config=TreeConfig(tree, GREEDY), **options).tokens)
    assert outputs[1] == outputs[0]
    assert len(set(outputs[0])) == 3  # the rows differ: the comparison sees each row's own tokens


#: The samplings whose laws the compiled path keeps by default: all-at-T=0.8 takes the paths of T = 0.7, top-k and
#: top-p together (those alone: slow, docs/project.md).
COMPILED_DEFAULT_SAMPLINGS = ("T=1", "greedy", "all-at-T=0.8", "stop+temperature")


@pytest.mark.parametrize("verifier", ("token", "block"))
@pytest.mark.parametrize(
    "name",
    [
        name if name in COMPILED_DEFAULT_SAMPLINGS else pytest.param(name, marks=pytest.mark.slow)
        for name in sorted(SAMPLINGS)
    ],
)
def test_exact_chain_law_on_compiled_path_against_autoregressive(pair, verifier, name):
    """gamma 2, the first 3 tokens, against the eager target's autoregressive law: within 1e-9."""
    target, _, compiled, draft = pair
    sampling = SAMPLINGS[name]
    report = exact(
        speculative_law(compiled, draft, PROMPT, SpeculativeConfig(2, sampling, verifier=verifier), 3),
        target,
        sampling,
        3,
    )
    assert report.max_abs_difference <= 1e-9 and report.branches > (0 if sampling.greedy else 10), (
        verifier,
        name,
        report,
    )


@pytest.mark.parametrize("verifier", sorted(TREE_RULES))
@pytest.mark.parametrize("temperature", (1.0, pytest.param(0.7, marks=pytest.mark.slow)))
def test_exact_tree_law_on_compiled_path_against_autoregressive(pair, verifier, temperature):
    """A branching tree under every verifier: the law of the first 3 tokens within 1e-9 of the eager target's."""
    target, _, compiled, draft = pair
    sampling = Sampling(temperature)
    report = exact(
        tree_law(compiled, draft, PROMPT, TreeConfig(Tree((-1, 0, 0, 1)), sampling, verifier), 3, progress=False),
        target,
        sampling,
        3,
    )
    assert report.max_abs_difference <= 1e-9, (verifier, report)


def test_exact_dynamic_tree_law_on_compiled_path_against_autoregressive(pair):
    target, _, compiled, draft = pair
    report = exact(
        tree_law(compiled, draft, PROMPT, TreeConfig(DynamicTree(2, 3, 5), Sampling(1.0)), 3, progress=False),
        target,
        Sampling(1.0),
        3,
    )
    assert report.max_abs_difference <= 1e-9, report


#: The mutants that run on the compiled path by default: the classic residual bug and those of positions and rollback,
#: what the static cache does differently (a rollback moves lengths only); the others, which the eager path already
#: catches (tests/decoders/audit/test_audit.py), behind slow (docs/project.md).
COMPILED_DEFAULT_MUTANTS = ("residual-from-p", "rejected-token-kept", "verify-one-late", "tree-flat-positions")


def _default_or_slow(bugs) -> list:
    return [bug if bug.name in COMPILED_DEFAULT_MUTANTS else pytest.param(bug, marks=pytest.mark.slow) for bug in bugs]


CHAIN_MUTANTS = [bug for bug in MUTANTS if bug.exact == "dp"]  # the ones the prefix programme sees


@pytest.mark.parametrize("bug", _default_or_slow(CHAIN_MUTANTS), ids=lambda bug: bug.name)
def test_mutant_fails_on_compiled_path(pair, bug):
    """Every chain mutant the prefix programme sees, on the compiled pair, under the sampling where it shows."""
    target, _, compiled, draft = pair
    sampling = bug.shows_with.bound(None, 4)
    report = exact(
        speculative_law(compiled, draft, PROMPT, SpeculativeConfig(2, sampling), 3, step=bug.step), target, sampling, 3
    )
    assert report.max_abs_difference > CAUGHT, (bug.name, report)


@pytest.mark.parametrize("planted", _default_or_slow(TREE_MUTANTS), ids=lambda planted: planted.name)
def test_tree_mutant_fails_on_compiled_path(pair, planted):
    target, _, compiled, draft = pair
    config = TreeConfig(Tree((-1, 0, 0, 0, 1)), planted.shows_with, planted.verifier)
    report = exact(
        tree_law(compiled, draft, PROMPT, config, 2, step=planted.step, progress=False), target, planted.shows_with, 2
    )
    assert report.max_abs_difference > CAUGHT, (planted.name, report)


def _compiled_call_arguments(compiled):
    """The arguments of one compiled call (a chain's verify of 3 tokens, 2 rows), as ``StaticHF._run`` passes them."""
    seen = []
    original, compiled._compiled = compiled._compiled, lambda *args: seen.append(args) or original(*args)
    try:
        with torch.no_grad():
            state = compiled.new_state(2, 16)
            compiled.forward(torch.tensor([[1, 2, 3, 0], [0, 1, 2, 3]]), state)  # a prompt: eager
            compiled.forward(torch.tensor([[1, 2, 3], [3, 2, 1]]), state)
    finally:
        compiled._compiled = original
    return seen[0]


def test_compiled_call_is_one_graph_against_a_planted_host_read(pair):
    """What the compiled path captures (``StaticHF._call``) traced by dynamo: one graph, no break, so inductor and
    CUDA graphs take it whole. The control, the same call followed by a host read, breaks, and ``fullgraph``
    refuses it."""
    _, _, compiled, _ = pair
    arguments = _compiled_call_arguments(compiled)

    def with_host_read(*args):
        logits = compiled._call(*args)
        if logits.sum().item() > 0:  # a value the host waits for
            return logits * 2
        return logits

    with torch.no_grad():
        explained = torch._dynamo.explain(compiled._call)(*arguments)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        planted = torch._dynamo.explain(with_host_read)(*arguments)
        assert planted.graph_break_count >= 1
        torch._dynamo.reset()
        with pytest.raises(Exception, match="(?i)graph break|unsupported|data-dependent|item"):
            torch.compile(with_host_read, fullgraph=True, backend="eager")(*arguments)


class _ReadingModel:
    """A model that reads a value to the host in every forward (the control of the host-read count)."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        return getattr(self.model, name)

    def forward(self, tokens, state, counts=None, keep=0):
        int(state.lengths.max())
        return self.model.forward(tokens, state, counts, keep)


@pytest.mark.parametrize("decoder", ("autoregressive", "chain"))
def test_host_reads_per_iteration_against_a_planted_read(wide_pair, decoder):
    """On the compiled pair an iteration reads the device once (the tokens and accepted counts, with the NaN check and
    the caches' lengths in the same read), plus one read at the end (the chain's acceptance statistics); the control,
    a target that reads once per forward, adds reads the count sees. Counted on CPU: the reads a CUDA run makes are
    the same calls."""
    from decoders.host_reads import HostReads

    target, draft = wide_pair[2:]
    prompts = [[1, 2, 3, 4], [5, 6]]

    def counted(model, tokens) -> tuple:
        with HostReads() as reads:
            if decoder == "autoregressive":
                run = generate_autoregressive(
                    model, prompts, max_new_tokens=tokens, sampling=Sampling(1.0), randomness=seeded(0)
                )
            else:
                run = generate_speculative(
                    model,
                    draft,
                    prompts,
                    max_new_tokens=tokens,
                    config=SpeculativeConfig(3, Sampling(1.0)),
                    randomness=seeded(0),
                )
        return reads.total, run.stats.iterations, dict(reads.by_name)

    counted(target, 20)  # every call shape of the counted run compiled first: a compilation reads the host
    reads, iterations, names = counted(target, 20)
    assert reads <= iterations + (decoder == "chain"), (reads, iterations, names)
    planted, iterations, names = counted(_ReadingModel(target), 20)
    assert planted > iterations + (decoder == "chain"), (planted, iterations, names)


def test_compile_choice_against_the_models_capabilities(capsys):
    """``--compile`` on: the shipped target (a TinyGPT, through its GPT-2 twin) is compiled, the copy draft has no
    compiled path and runs eagerly, which one line says; auto on a CPU and off leave every model eager, silently."""
    from decoders.bench.inputs import load_inputs
    from decoders.models.protocol import decode_path

    inputs = load_inputs(None, ["copy"], compile="on")
    lines = capsys.readouterr().err.strip().splitlines()
    assert decode_path(inputs.target).startswith("compiled") and decode_path(inputs.drafts["copy"]) == "eager"
    assert lines == ["the draft 'copy' (CopyDraft) has no compiled path: it runs eagerly"]
    for choice in ("auto", "off"):
        inputs = load_inputs(None, ["copy"], compile=choice)
        assert decode_path(inputs.target) == "eager" and capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="compile must be one of"):
        load_inputs(None, ["copy"], compile="yes")


@pytest.mark.slow
def test_inductor_chain_against_eager():
    """inductor itself (C++ kernels on a CPU): the chain's greedy tokens and its exact law at T = 1 as the eager
    path's (tens of seconds of compilation: slow)."""
    target, draft = peaked("llama", 4), peaked("gpt2", 4, seed=8)
    compiled_target, compiled_draft = target.compiled(backend="inductor"), draft.compiled(backend="inductor")
    report = exact(
        speculative_law(compiled_target, compiled_draft, PROMPT, SpeculativeConfig(2, Sampling(1.0)), 3),
        target,
        Sampling(1.0),
        3,
    )
    assert report.max_abs_difference <= 1e-9, report
    prompts = [[1, 2, 3], [0, 1]]
    assert (
        generate_speculative(
            compiled_target,
            compiled_draft,
            prompts,
            max_new_tokens=12,
            randomness=seeded(0),
            config=SpeculativeConfig(3, GREEDY),
        ).tokens
        == generate_speculative(
            target, draft, prompts, max_new_tokens=12, randomness=seeded(0), config=SpeculativeConfig(3, GREEDY)
        ).tokens
    )
