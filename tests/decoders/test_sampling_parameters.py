"""The sampling parameters engines expose (docs/theory-sampling.md §14): their law against transformers' logits
processors and OpenAI's formula, the decoders' exact laws against the target's, greedy decoding against autoregressive,
and the planted bugs engines shipped (in sampling parameters, randomness, draft laws and batches) against the exact
audit. Exact audits are float64 enumerations (tolerance 1e-9): no false positives."""

import itertools

import pytest
import torch
from command import run
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    SequenceBiasLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from decoders.audit.exact import autoregressive_law, compare_laws, speculative_law, whole_run_law
from decoders.audit.mutants import EXACT_SIZES, MUTANTS, mutant
from decoders.audit.runs import AuditRequest, run_audit, tree_shape
from decoders.audit.setups import sampler, speculative_run, tiny_draft, tiny_target
from decoders.audit.statistical import audit_sampler
from decoders.audit.verdict import TOLERANCE
from decoders.autoregressive import generate_autoregressive
from decoders.drafts import TINY, draft_names
from decoders.grammar import GrammarSpec
from decoders.policies import POLICIES
from decoders.randomness import seeded
from decoders.sampling import GREEDY, History, Sampling, adjusted_probs
from decoders.speculative import SpeculativeConfig, generate_speculative
from decoders.tree import REFERENCE_TREE_STEP, TreeConfig, TreeStep, generate_tree

#: Each parameter alone, then combinations (the issue's three and one of everything).
PARAMETERS = {
    "repetition": Sampling(1.0, repetition_penalty=1.6),
    "frequency+presence": Sampling(1.0, frequency_penalty=0.7, presence_penalty=0.3),
    "frequency over the prompt": Sampling(1.0, frequency_penalty=0.7, penalize_prompt=True),
    "min-p": Sampling(1.0, min_p=0.15),
    "logit bias": Sampling(1.0, logit_bias=((0, 1.5), (3, -2.0))),
    "top-k+top-p+min-p": Sampling(1.3, top_k=4, top_p=0.95, min_p=0.05),
    "repetition+bias": Sampling(1.0, repetition_penalty=1.6, logit_bias=((2, 1.0),)),
    "all at T=0.8": Sampling(
        0.8,
        top_k=4,
        top_p=0.97,
        min_p=0.05,
        repetition_penalty=1.3,
        frequency_penalty=0.4,
        presence_penalty=0.2,
        logit_bias=((1, 0.5),),
    ),
    "stop": Sampling(1.0, stop=(2,)),
    "stop+temperature+top-k": Sampling(0.8, top_k=4, stop=(1, 3)),
    # Grammars over the exact audit's letters (token 0 "a", 1 "b", ...), ended by token 2 (docs/theory-sampling.md §14).
    "regex": Sampling(1.0, stop=(2,), grammar=GrammarSpec("regex", "a[abd]*b")),
    "grammar+temperature+top-k": Sampling(0.7, top_k=3, stop=(2,), grammar=GrammarSpec("regex", "(a|ba)+")),
    "ebnf+repetition+bias": Sampling(
        1.0,
        repetition_penalty=1.5,
        logit_bias=((1, 0.7),),
        stop=(2,),
        grammar=GrammarSpec("ebnf", 'root ::= ("a" | "b" "d"?)+'),
    ),
}
SHIPPED_MUTANTS = [bug for bug in MUTANTS if bug.shipped]  # the bugs engines shipped (docs/theory-sampling.md §14)


def _transformers_law(logits, ids, sampling: Sampling):
    """transformers' processors and warpers in their order, as its sampling applies them -> probabilities."""
    processors = [
        SequenceBiasLogitsProcessor({(token,): bias for token, bias in sampling.logit_bias}),
        RepetitionPenaltyLogitsProcessor(sampling.repetition_penalty),
        TemperatureLogitsWarper(sampling.temperature),
        TopKLogitsWarper(sampling.top_k),
        TopPLogitsWarper(sampling.top_p),
        MinPLogitsWarper(sampling.min_p),
    ]
    scores = logits.clone()
    for processor in processors:
        scores = processor(ids, scores)
    return torch.softmax(scores, dim=-1)


def test_adjusted_probs_against_transformers_processors():
    """Logit bias, repetition penalty (over prompt and output), temperature, top-k, top-p and min-p in
    transformers' order: the same law to 1e-6 on random logits (no ties) and random histories."""
    generator = torch.Generator().manual_seed(0)
    sampling = Sampling(0.7, top_k=20, top_p=0.9, min_p=0.05, repetition_penalty=1.4, logit_bias=((3, 2.0), (7, -1.0)))
    for _ in range(20):
        logits = torch.randn(4, 50, generator=generator, dtype=torch.float64) * 3  # [B, V]
        ids = torch.randint(0, 50, (4, 12), generator=generator)  # the prompt (8) and the output (4)
        ours = adjusted_probs(logits, sampling, history=History.of(ids.tolist(), 50, "cpu", [4] * 4))
        assert torch.allclose(ours, _transformers_law(logits, ids, sampling), atol=1e-6)


def test_frequency_and_presence_against_openai_formula():
    """logit - frequency x count - presence x [count > 0], over the output only unless penalize_prompt."""
    logits = torch.tensor([[1.0, 2.0, 0.5, -1.0]], dtype=torch.float64)
    history = History.of([[0, 0, 1, 3, 3, 3]], 4, "cpu", generated=[4])  # prompt 0 0, output 1 3 3 3
    for prompt_too, counts in ((False, [0, 1, 0, 3]), (True, [2, 1, 0, 3])):
        sampling = Sampling(1.0, frequency_penalty=0.5, presence_penalty=0.25, penalize_prompt=prompt_too)
        expected = torch.softmax(logits - torch.tensor([[0.5 * c + 0.25 * (c > 0) for c in counts]]), dim=-1)
        assert torch.allclose(adjusted_probs(logits, sampling, history=history), expected)


def test_history_along_path_against_counting_prefixes():
    """History.along's counts at each position equal History.of of the prefix up to it."""
    rows, path = [[1, 2], [0, 0]], torch.tensor([[2, 2, 0], [1, 0, 1]])
    along = History.of(rows, 3, "cpu").along(path)  # [2, 4, 3]
    for b, i in itertools.product(range(2), range(4)):
        prefix = History.of([rows[b] + path[b, :i].tolist()], 3, "cpu", [i])
        assert torch.equal(along.output[b, i], prefix.output[0]) and torch.equal(along.prompt[b, i], prefix.prompt[0])


def _exact(**request):
    return run_audit(
        AuditRequest(exact=request.pop("exact", "dp"), horizon=request.pop("horizon", 3), **request)
    ).report


@pytest.mark.parametrize(
    "drafts",
    [
        pytest.param(("tabular", "copy", "close"), id="three-drafts"),
        pytest.param(draft_names(TINY), id="every-draft", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("name", PARAMETERS)
def test_exact_speculative_law_against_autoregressive(name, drafts):
    """Drafts with the token verifier, and the tabular draft with the block verifier: V = 5, gamma 2, three
    tokens, the target's law to 1e-9 (every draft: marked slow)."""
    sampling = PARAMETERS[name]
    for draft, verifier in [(draft, "token") for draft in drafts] + [("tabular", "block")]:
        report = _exact(target="tabular", draft=draft, verifier=verifier, sampling=sampling)
        assert report.passed and abs(report.total_mass - 1) < TOLERANCE, (draft, verifier, report.as_dict())


@pytest.mark.parametrize("name", PARAMETERS)
def test_exact_whole_runs_and_autoregressive_against_target(name):
    """The autoregressive decoder's whole runs under every parameter set (tabular target, V = 5), and the speculative
    loop's (counts and grammar carried between iterations) under four (tiny GPT, V = 3): three tokens, at least 4
    sequences each."""
    speculative = name in ("repetition+bias", "all at T=0.8", "stop", "grammar+temperature+top-k")
    for decoder in ("speculative", "autoregressive") if speculative else ("autoregressive",):
        tiny = (
            dict(target="tinygpt", vocabulary=3) if decoder == "speculative" else dict(target="tabular", vocabulary=5)
        )
        report = _exact(exact="whole-run", decoder=decoder, gamma=1, draft="close", sampling=PARAMETERS[name], **tiny)
        assert report.passed and report.sequences >= 4, (decoder, report.as_dict())


@pytest.mark.parametrize("name", ["all at T=0.8", "ebnf+repetition+bias"])
@pytest.mark.parametrize("policy", POLICIES)
def test_exact_policy_law_with_penalties_against_autoregressive(policy, name):
    report = _exact(policy=policy, target="tabular", draft="close", gamma=3, sampling=PARAMETERS[name])
    assert report.passed, report.as_dict()


@pytest.mark.parametrize("bug", SHIPPED_MUTANTS, ids=lambda bug: bug.name)
def test_shipped_mutant_caught_by_exact_audit(bug):
    """Each bug under the sampling it shows with (``Mutant.shows_with``), by the method that sees it; the reference
    decoder passes the same audit (the negative control)."""
    settings = dict(target="tinygpt", draft="close", sampling=bug.shows_with, exact=bug.exact)
    if bug.exact != "dp":  # whole runs branch on every draw: their smallest sizes
        settings.update(EXACT_SIZES[bug.exact], draft="tabular")
    caught, reference = _exact(mutant=bug.name, **settings), _exact(**settings)
    assert not caught.passed and caught.max_abs_difference > 1e-6, caught.as_dict()
    assert reference.passed, reference.as_dict()


def test_exact_tree_runs_with_stop_against_autoregressive():
    """The tree decoder's own loop ends a row at a stop token: its whole runs (target-only verifier, a two-node tree,
    V = 4, three tokens: stops leave 40 of the 64 sequences) and the RRS verifier by the prefix DP with min-p, to
    1e-9. The negative control: the same whole runs without the stop token fail against the stopped law."""
    settings = dict(decoder="tree", tree="parents:-1,0,0", target="tinygpt", draft="close", vocabulary=4)
    runs = _exact(exact="whole-run", verifier="target-only", sampling=Sampling(1.0, stop=(0,)), **settings)
    assert runs.passed and runs.sequences == 40 and abs(runs.total_mass - 1) < TOLERANCE, runs.as_dict()
    assert _exact(verifier="rrs", sampling=Sampling(1.0, min_p=0.1, stop=(0,)), **settings).passed
    target = tiny_target("tinygpt", 4)
    draft, config = tiny_draft("close", target), TreeConfig(tree_shape("parents:-1,0,0"), Sampling(1.0), "target-only")
    law, branches = whole_run_law(
        lambda randomness: generate_tree(
            target, draft, [[0, 1]], max_new_tokens=3, config=config, randomness=randomness
        ).tokens[0]
    )
    report = compare_laws(
        law,
        autoregressive_law(target, [0, 1], Sampling(1.0, stop=(0,)), 3),
        method="whole-run",
        horizon=3,
        branches=branches,
    )
    assert not report.passed and report.max_abs_difference > 1e-3, report.as_dict()


TREE_VERIFIERS = ("target-only", "rrs", "rrs-without-replacement", "kseq")


@pytest.mark.parametrize(
    "verifier, tree, name",
    [
        (verifier, tree, name)
        if name != "regex" or (verifier, tree) == ("target-only", "kary:2:2")
        else pytest.param(verifier, tree, name, marks=pytest.mark.slow)
        for verifier, tree in [(verifier, "kary:2:2") for verifier in TREE_VERIFIERS]
        + [("target-only", "dynamic:2:2:3")]
        for name in ("all at T=0.8", "regex", "ebnf+repetition+bias")
    ],
)
def test_exact_tree_law_with_parameters_against_autoregressive(verifier, tree, name):
    """Every tree verifier, and EAGLE-2's dynamic tree, follow penalties and grammars along each node's path (their
    drafts' laws leave them out, which §1 allows): the prefix DP on a two-level tree, V = 3, three tokens, to 1e-9.
    Each runs the EBNF grammar by default; the regex grammar's second pass through the same mask runs on one
    (the others: slow, docs/project.md)."""
    report = _exact(
        decoder="tree",
        verifier=verifier,
        tree=tree,
        target="tinygpt",
        draft="tinygpt",
        vocabulary=3,
        sampling=PARAMETERS[name],
    )
    assert report.passed and abs(report.total_mass - 1) < TOLERANCE, report.as_dict()


class TreeForgettingItsHistory(TreeStep):
    """A tree iteration that leaves the committed history where it was: the counts never grow."""

    def __call__(self, target, draft, state, *args, **kwargs):
        history = state.history
        outcome = super().__call__(target, draft, state, *args, **kwargs)
        state.history = history
        return outcome


@pytest.mark.parametrize("step, passes", [(REFERENCE_TREE_STEP, True), (TreeForgettingItsHistory(), False)])
def test_exact_tree_runs_with_penalties_against_autoregressive(step, passes):
    """Whole runs of the tree decoder's own loop carry the counts between iterations (a frequency penalty and a
    dynamic tree, V = 3, four tokens); the negative control, a step that forgets them, fails."""
    target = tiny_target("tinygpt", 3)
    sampling = Sampling(1.0, frequency_penalty=1.5, presence_penalty=0.5)
    config = TreeConfig(tree_shape("dynamic:2:1:2"), sampling, "target-only")
    law, branches = whole_run_law(
        lambda randomness: generate_tree(
            target,
            tiny_draft("tinygpt", target),
            [[0, 1]],
            max_new_tokens=4,
            config=config,
            randomness=randomness,
            step=step,
        ).tokens[0]
    )
    report = compare_laws(
        law, autoregressive_law(target, [0, 1], sampling, 4), method="whole-run", horizon=4, branches=branches
    )
    assert report.passed == passes and (passes or report.max_abs_difference > 1e-3), report.as_dict()


def test_decoder_ignoring_stop_against_stopped_law():
    """The negative control of the stop tests: speculative decoding run without the stop token, held against the
    target's law with it, fails the exact audit (its rows go on after the stop)."""
    target = tiny_target("tabular", 5)
    draft, stopped = tiny_draft("close", target), Sampling(1.0, stop=(2,))
    law, branches = speculative_law(target, draft, [0, 1], SpeculativeConfig(2, Sampling(1.0)), 3)
    report = compare_laws(
        law, autoregressive_law(target, [0, 1], stopped, 3), method="dp", horizon=3, branches=branches
    )
    assert not report.passed and report.max_abs_difference > 1e-3, report.as_dict()


@pytest.mark.parametrize("ignores_stop, passes", [(False, True), (True, False)])
def test_statistical_audit_with_stop_against_a_sampler_ignoring_it(ignores_stop, passes):
    """The statistical audit pads stopped rows with their stop token and expects that token after it: speculative
    decoding passes at n = 4,000 (level 0.01: a false failure has probability 0.01; seed fixed), and the same decoder
    run without the stop token fails (the negative control)."""
    target = tiny_target("tabular", 5)
    draft, sampling = tiny_draft("close", target), Sampling(1.0, stop=(2,))
    config = SpeculativeConfig(2, Sampling(1.0) if ignores_stop else sampling)
    sample = sampler(speculative_run(target, draft, [0, 1], config, 4), [0, 1], 4, stop=config.sampling.stop)
    report = audit_sampler(sample, target, [0, 1], sampling, n=4000, horizon=4, seed=3, draft=draft)
    assert report.passed == passes, report.as_dict()


def test_shared_noise_law_against_one_uniform_on_a_grid():
    """The recovery-shares-draft-noise mutant draws the draft token x and, after a rejection, the residual's token
    y from U's conditional law given x. The literal mechanism, x = F_q^-1(U) and y = F_r^-1(U) for one U, on a grid
    of 200,000 uniforms gives the same joint law of (x, y) to 1e-4 (the grid's resolution)."""
    q, residual = (
        torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64),
        torch.tensor([[0.1, 0.2, 0.7]], dtype=torch.float64),
    )
    u = (torch.arange(200_000, dtype=torch.float64) + 0.5) / 200_000
    x, y = (torch.searchsorted(law[0].cumsum(0), u, right=True).clamp(max=2) for law in (q, residual))
    step = mutant("recovery-shares-draft-noise").step
    for token in range(3):
        high = q[0, : token + 1].sum().reshape(1, 1)
        step.noise = (high - q[0, token], high)
        law = Recorder()
        step.correct(residual, torch.tensor([[token]]), torch.tensor([[True]]), torch.tensor([0]), law)
        grid = torch.bincount(y[x == token], minlength=3) / (x == token).sum()
        assert torch.allclose(law.probs[0] / law.probs[0].sum(), grid.to(torch.float64), atol=1e-4), (token, law.probs)


class Recorder:
    """A randomness source that records the law of its one categorical draw and returns token 0."""

    def categorical(self, probs):
        self.probs = probs
        return torch.zeros(probs.shape[:-1], dtype=torch.int64)


def test_counting_bugs_are_a_blind_spot_of_the_prefix_dp():
    """The DP rebuilds the counts from each prefix, so a bug in the counts carried between iterations passes it
    (documented in docs/theory-sampling.md §14); the whole-run audit catches it (above)."""
    for name in ("penalty-last-token-only", "penalty-counts-proposals"):
        bug = next(m for m in SHIPPED_MUTANTS if m.name == name)
        assert _exact(mutant=name, target="tinygpt", draft="close", sampling=bug.shows_with).passed


@pytest.mark.parametrize("grammar", [None, GrammarSpec("regex", "[a-h]+(ij|k)*[lm]")], ids=["", "regex"])
@pytest.mark.parametrize("kind", ["tabular", "tinygpt"])
def test_greedy_with_every_parameter_against_autoregressive(kind, grammar):
    """At temperature 0 the speculative decoder emits autoregressive greedy decoding's tokens, token for token (56
    tokens, the most the tiny models' context of 64 holds after the prompt and an iteration's overshoot, or up to the
    stop token that ends the grammar; V = 16, every draft, gamma 1 and 4), under penalties and a logit bias; so do
    the tree decoders (40 tokens: a tree's nodes need room too; static and dynamic trees, target-only and RRS)."""
    target = tiny_target(kind, 16)
    sampling = Sampling(
        0.0,
        repetition_penalty=1.5,
        frequency_penalty=0.3,
        presence_penalty=0.2,
        logit_bias=((5, 0.8),),
        stop=(15,) if grammar else (),
        grammar=grammar,
    ).bound(None, 16)
    plain = generate_autoregressive(target, [[1, 2]], max_new_tokens=56, sampling=sampling, randomness=seeded(0)).tokens
    assert (
        plain
        != generate_autoregressive(target, [[1, 2]], max_new_tokens=56, sampling=GREEDY, randomness=seeded(0)).tokens
    )  # the parameters change the text
    for draft, gamma in itertools.product(draft_names(TINY), (1, 4)):
        got = generate_speculative(
            target,
            tiny_draft(draft, target),
            [[1, 2]],
            max_new_tokens=56,
            config=SpeculativeConfig(gamma, sampling),
            randomness=seeded(0),
        ).tokens
        assert got == plain, (draft, gamma)
    if kind == "tinygpt":  # the tree decoders, whose models need tree attention
        for shape, verifier in (("kary:2:3", "target-only"), ("dynamic:3:3:8", "target-only"), ("kary:2:2", "rrs")):
            config = TreeConfig(tree_shape(shape), sampling, verifier)
            got = generate_tree(
                target, tiny_draft("tinygpt", target), [[1, 2]], max_new_tokens=40, config=config, randomness=seeded(0)
            ).tokens
            assert got == tuple(row[:40] for row in plain), (shape, verifier)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--exact", "--presence-penalty", "nan"], "presence_penalty must be a finite number"),
        (["--exact", "--repetition-penalty", "0"], "repetition_penalty must be > 0"),
        (["--exact", "--min-p", "1.5"], "min_p must be in [0, 1]"),
        (["--exact", "--logit-bias", "a=1"], "is not TOKEN=VALUE"),
        (["--exact", "--logit-bias", "9=1"], "logit_bias token must be below the vocabulary size 5"),
        (["--engine", "llama-cpp", "--presence-penalty", "1"], "drop --frequency-penalty, --presence-penalty"),
        (["--exact", "--stop", "9"], "stop token must be below the vocabulary size 5"),
        (["--exact", "--stop", "-1"], "stop token must be a non-negative integer, got -1"),
        (["--engine", "llama-cpp", "--stop", "2"], "--logit-bias, --stop"),
    ],
)
def test_sampling_flags_against_error_contract(argv, fragment, capsys):
    """One line on stderr, exit 2, before any work."""
    status, out, err = run(capsys, "audit", *argv)
    assert status == 2 and err.count("\n") == 1 and fragment in err, err


@pytest.mark.parametrize(
    "argv, status",
    [
        (["--mutant", "min-p-ignored-in-verification"], 1),  # under its own flags: min-p 0.3
        (["--mutant", "min-p-ignored-in-verification", "--min-p", "0"], 0),  # explicit flags override: harmless there
        (["--mutant", "tree-candidates-vs-draft"], 1),  # its decoder, verifier, models and tree come with it
        (["--mutant", "penalty-last-token-only"], 1),  # a bare --exact: its own method, whole runs (the DP is blind)
        (["dp", "--mutant", "penalty-last-token-only"], 0),  # the method named overrides it: the DP's blind spot
    ],
)
def test_mutant_alone_against_its_own_flags(argv, status, capsys):
    """`audit --mutant NAME --exact` with no other flag audits the bug where it shows, by its own exact method (before,
    a tree mutant without its verifier, a sampling bug without its parameter and a counting bug by the prefix DP
    passed, which reads as "harmless")."""
    assert run(capsys, "audit", "--exact", *argv)[0] == status


def test_greedy_shipped_pair_with_every_parameter_against_autoregressive():
    """The shipped pair at temperature 0 under penalties, a logit bias and a regex over its characters (import
    lines; the out-of-vocabulary token stops): 64 tokens of speculative chain (gamma 4) and tree decoding (binary,
    depth 3) equal autoregressive decoding, which the parameters change (plain greedy writes spaces here)."""
    from decoders import zoo
    from decoders.models.corpus import OTHER, decode, encode

    target, draft = zoo.load_target(), zoo.load_draft("transformer")
    sampling = Sampling(
        0.0,
        repetition_penalty=1.3,
        frequency_penalty=0.2,
        presence_penalty=0.1,
        logit_bias=((int(encode("e")[0]), 1.0),),
        stop=(OTHER,),
        grammar=GrammarSpec("regex", r"(import [a-z_.]+\n)+"),
    ).bound(None, target.vocab_size)
    prompt = [encode("import os\n").tolist()]
    plain = generate_autoregressive(target, prompt, max_new_tokens=64, sampling=sampling, randomness=seeded(0)).tokens
    assert len(plain[0]) == 64 and decode(plain[0]).startswith("import ")
    assert (
        plain
        != generate_autoregressive(target, prompt, max_new_tokens=64, sampling=GREEDY, randomness=seeded(0)).tokens
    )
    for config, decoder in (
        (SpeculativeConfig(4, sampling), generate_speculative),
        (TreeConfig(tree_shape("kary:2:3"), sampling, "target-only"), generate_tree),
    ):
        got = decoder(target, draft, prompt, max_new_tokens=64, config=config, randomness=seeded(0)).tokens
        assert got == plain, decode(got[0])
