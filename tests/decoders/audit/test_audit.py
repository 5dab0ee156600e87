"""The audits against the target's autoregressive law, the planted-bug decoders they must catch, and
their calibration.

Exact audits compare laws to 1e-9 (``TOLERANCE``); a deviation counts as caught above 1e-6. Statistical
audits use fixed seeds: a correct decoder fails one at level ``LEVEL`` with probability at most 1e-4
(Bonferroni), and a mutant counts as caught at p < 1e-4.

The fixture pairs and their acceptance (alpha, the mean of sum min(p, q) at verified positions, measured
over 2000 rows x 8 tokens at gamma 2, T = 1, seed 0; "full" is the share of iterations that accept both
draft tokens, where a bonus token is drawn):

    target       draft     alpha  full       target       draft    alpha  full
    tabular V=5  tabular   0.342  0.126      tinygpt V=5  tabular  0.063  0.004
    tabular V=5  tinygpt   0.406  0.148      tinygpt V=5  close    0.779  0.608
    tabular V=5  ngram     0.580  0.342      tinygpt V=3  tabular  0.113  0.019
    tabular V=5  copy      0.314  0.073      tinygpt V=3  copy     0.914  0.630
    tabular V=5  random    0.531  0.266      tinygpt V=3  tinygpt  0.736  0.540
    tabular V=5  close     0.800  0.655      tinygpt V=3  close    0.883  0.784
    order0 V=5   close     0.939  0.884      order0 V=3   close    0.953  0.907
    order0 V=5   tabular   0.185  0.016      order0 V=3   tabular  0.523  0.287

The tabular draft of the TinyGPT target (the original mutant fixture) almost never accepts both tokens,
so bugs on the full-acceptance path are tested on the close pairs (``test_close_pairs_accept_most_tokens``
holds them to alpha >= 0.7).
"""

import itertools

import pytest
import torch
from engine_standin import ZipfEngine, ZipfModel
from scipy import stats

from decoders.audit.exact import (
    BranchBudgetExceeded,
    Enumerator,
    autoregressive_law,
    compare_laws,
    lenience_bound_violations,
    prefix_law,
    speculative_law,
    whole_run_law,
)
from decoders.audit.mutants import EXACT_SIZES, MUTANTS, mutant
from decoders.audit.runs import AuditRequest, _audit_samples, run_audit
from decoders.audit.samples import write_rows
from decoders.audit.setups import sampler, speculative_run, tiny_draft, tiny_target
from decoders.audit.statistical import audit_sampler, conditionals, detectable_tv
from decoders.audit.verdict import TOLERANCE
from decoders.autoregressive import generate_autoregressive
from decoders.blockwise import BlockwiseConfig, BlockwiseGPT, generate_blockwise
from decoders.drafts import TINY, draft_names
from decoders.engines.base import EngineSampling
from decoders.randomness import TorchRandomness, seeded
from decoders.sampling import GREEDY, Sampling
from decoders.speculative import REFERENCE_STEP, SpeculativeConfig, generate_speculative

SAMPLINGS = {
    "T=1": Sampling(1.0),
    "T=0.7": Sampling(0.7),
    "top-k 2": Sampling(1.0, top_k=2),
    "top-p 0.8": Sampling(1.0, top_p=0.8),
    "greedy": GREEDY,
}
PROMPT = [1, 2]
CAUGHT = 1e-6
STATISTICAL_N = 50_000  # the bound for catching every mutant
NEW_MUTANT_N = 20_000
MUTANT_GAMMA, MUTANT_HORIZON = 2, 4
CALIBRATION_AUDITS = 100  # seeded audits of a correct sampler (as the two-sample size tests' 100 splits)


def exact_report(law_and_branches, target, sampling, horizon, method="dp"):
    law, branches = law_and_branches
    return compare_laws(
        law, autoregressive_law(target, PROMPT, sampling, horizon), method=method, horizon=horizon, branches=branches
    )


@pytest.fixture(scope="module")
def tabular_target():
    return tiny_target("tabular", 5)


@pytest.fixture(scope="module")
def gpt_target():
    return tiny_target("tinygpt", 5)


def _law_cases(part: str) -> list:
    """(verifier, sampling name, gamma) of the chain law tests: "default" all but T = 0.7 at gamma 3 (8 s of the
    close draft's 20, the same paths as T = 1 at gamma 3 with another p), "rest" that one, "all" both."""
    cases = list(itertools.product(("token", "block"), SAMPLINGS, (1, 2, 3)))
    heavy = [case for case in cases if case[1:] == ("T=0.7", 3)]
    return {"default": [c for c in cases if c not in heavy], "rest": heavy, "all": cases}[part]


@pytest.mark.parametrize(
    "draft_kind, part",
    [
        (kind, "default") if kind in ("tabular", "close") else pytest.param(kind, "all", marks=pytest.mark.slow)
        for kind in draft_names(TINY)
    ]
    + [pytest.param(kind, "rest", marks=pytest.mark.slow) for kind in ("tabular", "close")],
)
def test_exact_speculative_law_against_autoregressive(tabular_target, draft_kind, part):
    """Every verifier x sampling x gamma 1-3 from a draft: V = 5, T = 4, exact to 1e-9. The default suite runs the
    tabular draft (acceptance 0.34: mostly rejections) and the close one (0.80: mostly full acceptance), less T = 0.7
    at gamma 3 (``_law_cases``); the other drafts take the same paths with another q (slow, docs/project.md)."""
    draft = tiny_draft(draft_kind, tabular_target)
    for verifier, name, gamma in _law_cases(part):
        sampling = SAMPLINGS[name]
        config = SpeculativeConfig(gamma, sampling, verifier=verifier)
        report = exact_report(speculative_law(tabular_target, draft, PROMPT, config, 4), tabular_target, sampling, 4)
        assert report.passed and abs(report.total_mass - 1) < TOLERANCE, (verifier, name, gamma, report.as_dict())


_WHOLE_RUN_PAIRS = (
    ("tinygpt", "tabular", 2),
    ("tinygpt", "copy", 1),
    ("tinygpt", "tinygpt", 1),
    ("tabular", "ngram", 1),
    ("order0", "close", 2),
)


def _whole_run_cases() -> list:
    """(target, draft, gamma, top-k, vocabulary, horizon): every pair at V = 3, T = 3; gamma 2 by default with the close
    draft at V = 2, T = 4 (745 branches, 7 s, where V = 3, T = 3 takes 3,161 and 29 s), where a fully accepted
    first iteration (3 tokens) is followed by another; its V = 3 runs, its top-k and the tabular draft's, mostly
    rejected, repeat paths taken (slow, docs/project.md)."""
    cases = []
    for pair in _WHOLE_RUN_PAIRS:
        for top_k in (None, 2):
            case = (*pair, top_k, 3, 3)
            cases.append(pytest.param(*case, marks=pytest.mark.slow) if pair[2] == 2 else case)
    return cases + [("order0", "close", 2, None, 2, 4)]


@pytest.mark.parametrize("target_kind, draft_kind, gamma, top_k, vocabulary, horizon", _whole_run_cases())
def test_exact_whole_run_law_against_autoregressive(target_kind, draft_kind, gamma, top_k, vocabulary, horizon):
    """The full loop, caches and rollback included, along every branch (several iterations, some after a fully
    accepted one), at T = 1 and with top-k 2 (``_whole_run_cases``)."""
    prompt = PROMPT if vocabulary > 2 else [0, 1]
    target, sampling = tiny_target(target_kind, vocabulary), Sampling(1.0, top_k=top_k)
    generate = speculative_run(
        target, tiny_draft(draft_kind, target), prompt, SpeculativeConfig(gamma, sampling), horizon
    )
    law, branches = whole_run_law(lambda randomness: generate([prompt], randomness)[0])
    report = compare_laws(
        law,
        autoregressive_law(target, prompt, sampling, horizon),
        method="whole-run",
        horizon=horizon,
        branches=branches,
    )
    assert report.passed and report.branches > 20, report.as_dict()


def test_exact_lenience_deviates_within_its_bound(tabular_target):
    """Lenience l < 1 is reported as deviating, and no sequence exceeds p / l^length; the bound of l = 1
    (exactness) is violated, so the check has power."""
    draft = tiny_draft("tabular", tabular_target)
    for lenience in (0.5, 0.8):
        law, branches = speculative_law(tabular_target, draft, PROMPT, SpeculativeConfig(2, Sampling(1.0), lenience), 4)
        reference = autoregressive_law(tabular_target, PROMPT, Sampling(1.0), 4)
        report = compare_laws(law, reference, method="dp", horizon=4, branches=branches)
        assert report.max_abs_difference > CAUGHT and not report.passed
        assert lenience_bound_violations(law, reference, lenience) == []
        assert len(lenience_bound_violations(law, reference, 1.0)) > 0


def test_exact_blockwise_criteria_against_greedy_target(gpt_target):
    """Exact-match blockwise decoding is the target's greedy law; the approximate criteria deviate."""
    model = BlockwiseGPT(gpt_target, 4)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # seeded random heads: proposals that are often not the greedy token
        for parameter in model.proposal.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    model = model.to(torch.float64).eval()
    for config, exact in (
        (BlockwiseConfig(), True),
        (BlockwiseConfig("top_k", top_k=3), False),
        (BlockwiseConfig("distance", epsilon=2), False),
    ):
        report = exact_report(
            whole_run_law(
                lambda randomness: generate_blockwise(model, [PROMPT], max_new_tokens=4, config=config).tokens[0]
            ),
            model,
            GREEDY,
            4,
            "whole-run",
        )
        assert report.passed == exact and (exact or report.max_abs_difference > CAUGHT), (config, report.as_dict())


ORIGINAL_MUTANTS = MUTANTS[:10]  # on the TinyGPT target with the tabular draft since the first audits
NEW_MUTANTS = MUTANTS[10:15]  # bugs that couple positions or rows, or act after full acceptance
# MUTANTS[15:], the bugs engines shipped: tests/decoders/test_sampling_parameters.py
CLOSE_FIXTURES = (("order0", 5), ("tinygpt", 5))  # the whole-run methods: EXACT_SIZES


def exact_mutant_report(bug, target_kind, vocabulary, draft_kind, *, reference=False):
    """The mutant's law (or with ``reference`` the reference decoder's on the same settings) by the exact
    method that sees it (``Mutant.exact``): the prefix DP at V = ``vocabulary``, gamma 2, four tokens; whole runs
    and whole runs of a batch of two rows at their smallest sizes (``EXACT_SIZES``)."""
    size = EXACT_SIZES.get(bug.exact, dict(vocabulary=vocabulary, gamma=MUTANT_GAMMA, horizon=MUTANT_HORIZON))
    return run_audit(
        AuditRequest(
            mutant=None if reference else bug.name,
            target=target_kind,
            draft=draft_kind,
            sampling=bug.shows_with,
            exact=bug.exact,
            **size,
        )
    ).report


@pytest.mark.parametrize("bug", ORIGINAL_MUTANTS, ids=lambda bug: bug.name)
def test_mutant_caught_by_exact_audit(bug):
    report = exact_mutant_report(bug, "tinygpt", 5, "tabular")
    assert report.max_abs_difference > CAUGHT and not report.passed, report.as_dict()


@pytest.mark.parametrize("target_kind, vocabulary", CLOSE_FIXTURES)
@pytest.mark.parametrize("bug", NEW_MUTANTS, ids=lambda bug: bug.name)
def test_new_mutant_caught_by_exact_audit_with_close_draft(bug, target_kind, vocabulary):
    """On a target whose conditionals ignore the prefix (order0) and on a TinyGPT, with the close draft."""
    report = exact_mutant_report(bug, target_kind, vocabulary, "close")
    assert report.max_abs_difference > CAUGHT and not report.passed, report.as_dict()


@pytest.mark.parametrize(
    "bug",
    [mutant(name) for name in ("copies-previous", "uniform-per-row", "batch-min-rollback")],
    ids=lambda bug: bug.exact,
)
def test_reference_passes_every_exact_method_with_close_draft(bug):
    """The negative control of the mutant tests above: the reference decoder passes each method with the
    settings a mutant is caught with, so a caught mutant is caught for its bug."""
    report = exact_mutant_report(bug, "order0", 5, "close", reference=True)
    assert report.passed and abs(report.total_mass - 1) < TOLERANCE, report.as_dict()


def test_no_rollback_is_a_blind_spot_of_the_prefix_dp(gpt_target):
    """The DP prefills every prefix afresh, so a bug between iterations passes it (documented)."""
    target, draft = gpt_target, tiny_draft("tabular", gpt_target)
    dp = exact_report(
        speculative_law(
            target,
            draft,
            PROMPT,
            SpeculativeConfig(MUTANT_GAMMA, Sampling(1.0)),
            MUTANT_HORIZON,
            step=mutant("no-rollback").step,
        ),
        target,
        Sampling(1.0),
        MUTANT_HORIZON,
    )
    assert dp.passed


@pytest.fixture(scope="module")
def float32_models():
    target = tiny_target("tinygpt", 5, dtype=torch.float32)
    return target, tiny_draft("tabular", target, dtype=torch.float32)


def statistical_audit(models, step, sampling, seed=0, n=STATISTICAL_N, source=None):
    target, draft = models
    generate = speculative_run(
        target, draft, PROMPT, SpeculativeConfig(MUTANT_GAMMA, sampling), MUTANT_HORIZON, step=step, source=source
    )
    return audit_sampler(
        sampler(generate, PROMPT, MUTANT_HORIZON),
        target,
        PROMPT,
        sampling,
        n=n,
        horizon=MUTANT_HORIZON,
        seed=seed,
        draft=draft,
    )


def _slow_unless(kept: tuple, values, name=lambda value: value) -> list:
    """``values`` as parameters, those whose ``name`` is not in ``kept`` marked slow: a statistical test's power
    and calibration run once by default, their repeats under other bugs or samplings behind ``slow``
    (docs/project.md, "What CI runs")."""
    return [value if name(value) in kept else pytest.param(value, marks=pytest.mark.slow) for value in values]


@pytest.mark.parametrize(
    "bug", _slow_unless(("residual-from-p",), ORIGINAL_MUTANTS, lambda bug: bug.name), ids=lambda bug: bug.name
)
def test_mutant_caught_by_statistical_audit(float32_models, bug):
    report = statistical_audit(float32_models, bug.step, bug.shows_with, source=bug.source)
    assert report.p_value < 1e-4 and not report.passed, report.test_p_values


@pytest.mark.parametrize(
    "target_kind, vocabulary", [CLOSE_FIXTURES[0], pytest.param(*CLOSE_FIXTURES[1], marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("bug", NEW_MUTANTS, ids=lambda bug: bug.name)
def test_new_mutant_caught_by_statistical_audit_with_close_draft(bug, target_kind, vocabulary):
    target = tiny_target(target_kind, vocabulary, dtype=torch.float32)
    report = statistical_audit(
        (target, tiny_draft("close", target, dtype=torch.float32)),
        bug.step,
        bug.shows_with,
        n=NEW_MUTANT_N,
        source=bug.source,
    )
    assert report.p_value < 1e-4 and not report.passed, report.test_p_values


def test_close_pairs_accept_most_tokens():
    """The strong-draft fixtures accept at least 70% (the module docstring's table)."""
    for target_kind, vocabulary in CLOSE_FIXTURES + (("tinygpt", 3), ("order0", 3), ("tabular", 5)):
        target = tiny_target(target_kind, vocabulary, dtype=torch.float32)
        run = generate_speculative(
            target,
            tiny_draft("close", target, dtype=torch.float32),
            [PROMPT] * 2000,
            max_new_tokens=8,
            config=SpeculativeConfig(2, Sampling(1.0)),
            randomness=seeded(0),
        )
        assert run.stats.alpha_estimate >= 0.7, (target_kind, vocabulary, run.stats.alpha_estimate)


@pytest.mark.parametrize("target_kind, vocabulary", CLOSE_FIXTURES)
def test_reference_passes_statistical_audit_with_close_draft(target_kind, vocabulary):
    """Fails with probability <= 0.01 per fixture (the level)."""
    target = tiny_target(target_kind, vocabulary, dtype=torch.float32)
    report = statistical_audit(
        (target, tiny_draft("close", target, dtype=torch.float32)), REFERENCE_STEP, Sampling(1.0), n=NEW_MUTANT_N
    )
    assert report.passed, report.test_p_values


@pytest.mark.parametrize("sampling", _slow_unless(("T=1",), SAMPLINGS), ids=SAMPLINGS.keys())
def test_reference_passes_statistical_audit(float32_models, sampling):
    sampling = SAMPLINGS[sampling]
    report = statistical_audit(float32_models, REFERENCE_STEP, sampling)
    assert report.passed and report.impossible_tokens == 0, report.test_p_values  # fails with probability <= 0.01
    assert report.n == STATISTICAL_N and len(report.position_p_values["draft_ratio"]) == MUTANT_HORIZON


def direct_sampler(target, sampling, horizon, first_token_shift=0.0):
    """Autoregressive sampling from ``target``; with ``first_token_shift`` d the first token is drawn from
    (1 - d) p + d e_top, e_top the likeliest token: total variation d (1 - p(top)) at position 0."""

    def sample(n, generator):
        randomness = TorchRandomness(generator)
        p = conditionals(target, PROMPT, torch.zeros(1, 1, dtype=torch.int64), sampling)[0, 0]  # [V]
        shifted = (1 - first_token_shift) * p + first_token_shift * torch.nn.functional.one_hot(p.argmax(), len(p))
        first = randomness.categorical(shifted.expand(n, -1))
        rest = generate_autoregressive(
            target,
            [PROMPT + [token] for token in first.tolist()],
            max_new_tokens=horizon - 1,
            sampling=sampling,
            randomness=randomness,
        )
        return torch.cat([first[:, None], torch.tensor(rest.tokens)], dim=1)

    return sample


def test_statistical_audit_calibration_against_binomial_interval():
    """Over 100 seeded audits of a correct sampler the rejection count at level 0.01 lies in the 99%
    binomial interval of Bin(100, 0.01), [0, 4], or below it (Bonferroni is conservative); without the correction
    (the smallest raw p-value against the level) the same audits reject far too often."""
    target = tiny_target("tabular", 5, dtype=torch.float32)
    draft = tiny_draft("tabular", target, dtype=torch.float32)
    generate = speculative_run(target, draft, PROMPT, SpeculativeConfig(2, Sampling(1.0)), 6)
    reports = [
        audit_sampler(
            sampler(generate, PROMPT, 6), target, PROMPT, Sampling(1.0), n=1000, horizon=6, seed=seed, draft=draft
        )
        for seed in range(CALIBRATION_AUDITS)
    ]
    rejections = sum(not report.passed for report in reports)
    low, high = stats.binom.interval(0.99, CALIBRATION_AUDITS, 0.01)
    uncorrected = sum(min(min(values) for values in report.position_p_values.values()) < 0.01 for report in reports)
    print(
        f"rejections {rejections}/{CALIBRATION_AUDITS}, 99% interval [{low:.0f}, {high:.0f}], uncorrected "
        f"{uncorrected}/{CALIBRATION_AUDITS}"
    )
    assert rejections <= high
    assert uncorrected > high  # the negative control: a miscalibrated audit fails this test


def test_statistical_audit_power_at_detectable_tv():
    """A first-token deviation of exactly ``detectable_tv`` (mass moved to the likeliest token) is
    rejected in at least 80 of 100 seeded audits; at 90% power a count below 80 has probability < 0.002."""
    target = tiny_target("tabular", 5, dtype=torch.float32)
    sampling, n, horizon = Sampling(1.0), 2000, 3
    tests = 2 * (horizon + horizon * (horizon - 1) // 2 + 1) + 2  # per ordering: KS, pairs, rows
    p = conditionals(target, PROMPT, torch.zeros(1, 1, dtype=torch.int64), sampling)[0, 0]
    shift = detectable_tv(n, tests, 0.01) / (1 - float(p.max()))
    reports = [
        audit_sampler(
            direct_sampler(target, sampling, horizon, shift), target, PROMPT, sampling, n=n, horizon=horizon, seed=seed
        )
        for seed in range(100)
    ]
    assert reports[0].tests == tests
    rejections = sum(not report.passed for report in reports)
    print(f"rejections at the detectable TV {reports[0].detectable_tv:.4f}: {rejections}/100")
    assert rejections >= 80


def test_statistical_audit_of_direct_sampling_and_a_shifted_one():
    target = tiny_target("tabular", 5, dtype=torch.float32)
    fair = audit_sampler(
        direct_sampler(target, Sampling(0.7), 3), target, PROMPT, Sampling(0.7), n=5000, horizon=3, seed=1
    )
    shifted = audit_sampler(
        direct_sampler(target, Sampling(0.7), 3, 0.2), target, PROMPT, Sampling(0.7), n=5000, horizon=3, seed=1
    )
    assert fair.passed and fair.joint_tokens == 3 and fair.tests == 2 * (3 + 3 + 1) + 2
    assert shifted.p_value < 1e-4


def test_statistical_audit_support_check():
    """A token outside top-k's support refutes the sampler outright."""
    target = tiny_target("tabular", 5, dtype=torch.float32)
    sample = direct_sampler(target, Sampling(1.0), 2)  # unfiltered, audited against top-k 2
    report = audit_sampler(sample, target, PROMPT, Sampling(1.0, top_k=2), n=500, horizon=2, seed=0)
    assert report.impossible_tokens > 0 and report.p_value == 0 and not report.passed


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"n": 1}, "n must"),
        ({"horizon": 0}, "horizon must"),
        ({"level": 1.5}, "level must"),
        ({"horizon": 3}, "must return shape"),
        ({"prompt": []}, "prompt must be a non-empty sequence of token ids"),
        ({"draft": tiny_target("tabular", 4)}, "vocabularies differ"),
    ],
)
def test_statistical_audit_bad_input_raises_value_errors(kwargs, fragment):
    """An empty prompt and a draft of another vocabulary used to raise RuntimeError inside torch."""
    target = tiny_target("tabular", 5, dtype=torch.float32)
    arguments = dict(prompt=PROMPT, n=100, horizon=2, seed=0) | kwargs
    with pytest.raises(ValueError, match=fragment):
        audit_sampler(direct_sampler(target, Sampling(1.0), 2), target, sampling=Sampling(1.0), **arguments)


def test_enumerator_branches_against_product_law():
    """Two sources, a joint bernoulli pair and a categorical each: every branch once, probabilities summing
    to 1 per source, as in the product law written out by hand."""
    bernoulli = torch.tensor([[0.25, 1.0], [0.5, 0.0]])  # [source, 2]
    categorical = torch.tensor([[0.0, 2.0, 2.0], [1.0, 0.0, 3.0]])  # unnormalised rows
    sources, scripts, outcomes, runs = [0, 1], [(), ()], {}, 0
    while scripts:
        enumerator = Enumerator(scripts)
        bits = enumerator.bernoulli(bernoulli[sources])  # [N, 2]
        token = enumerator.categorical(categorical[sources])  # [N]
        for row, source in enumerate(sources):
            key = (source, tuple(bits[row].tolist()), int(token[row]))
            assert key not in outcomes
            outcomes[key] = enumerator.probability[row]
        runs += 1
        sources = [sources[row] for row, _ in enumerator.branches]
        scripts = [script for _, script in enumerator.branches]
    assert outcomes == pytest.approx(
        {
            (0, (False, True), 1): 0.375,
            (0, (False, True), 2): 0.375,
            (0, (True, True), 1): 0.125,
            (0, (True, True), 2): 0.125,
            (1, (False, False), 0): 0.125,
            (1, (False, False), 2): 0.375,
            (1, (True, False), 0): 0.125,
            (1, (True, False), 2): 0.375,
        },
        abs=1e-15,
    )
    assert runs == 3  # defaults first, then the branches of the first draw and of the second


def _uniform_iteration(k: int):
    """A decoder iteration that emits one token uniform over k: k branches from every prefix."""

    def iterate(prompts: list, randomness) -> list:
        return [[int(token)] for token in randomness.categorical(torch.full((len(prompts), k), 1.0 / k))]

    return iterate


def test_exact_budgets_against_counted_branches():
    """One uniform token of 3 per iteration, horizon 3: the prefix programme runs 3 x (1 + 3 + 9) = 39 branches, whole
    runs 27. A budget of exactly that many runs to the uniform law; one less stops as soon as the prefixes waiting, at
    the count per prefix so far, take the count past it (12 run), and a budget of 10 after the first prefix (3 run)."""
    law, branches = prefix_law(_uniform_iteration(3), [0], 3, progress=False, max_branches=39)
    assert branches == 39 and law == pytest.approx({key: 1 / 27 for key in itertools.product(range(3), repeat=3)})
    with pytest.raises(
        BranchBudgetExceeded,
        match=r"needs more than its budget of 38 branches: 12 run and about 27 "
        r"more to come \(9 prefixes still to extend, at 3 branches each",
    ):
        prefix_law(_uniform_iteration(3), [0], 3, progress=False, max_branches=38)  # the count is exact here
    with pytest.raises(
        BranchBudgetExceeded, match=r"budget of 10 branches: 3 run and about 9 more to come \(3 prefixes"
    ):
        prefix_law(_uniform_iteration(3), [0], 3, progress=False, max_branches=10)

    def three_tokens(randomness):
        return tuple(int(randomness.categorical(torch.full((1, 3), 1 / 3))[0]) for _ in range(3))

    assert whole_run_law(three_tokens, progress=False, max_branches=27)[1] == 27
    with pytest.raises(BranchBudgetExceeded, match="budget of 26 branches"):
        whole_run_law(three_tokens, progress=False, max_branches=26)


def _zipf_audit(tmp_path, engine, n: int, seed: int):
    """`audit --samples FILE`'s statistical audit (its own function) of ``engine``'s n samples of 4 tokens after a
    prompt of class 0, against the Zipf stand-in's 49k-token law (tests/engine_standin.py)."""
    path = tmp_path / "zipf.jsonl"
    write_rows(path, [0], engine.generate("p", n, 4, EngineSampling(1.0), seed=seed).rows)
    return _audit_samples(
        AuditRequest(samples=str(path), sampling=Sampling(1.0), seed=seed), ZipfModel(ZipfEngine())
    ).report


def test_statistical_audit_of_samples_on_a_real_vocabulary_size(tmp_path):
    """Where users are: a samples file of 500 draws over a 49k vocabulary (most tokens seen once) against its own
    law passes (false-positive probability 0.01); the same engine at T = 0.9 when asked for 1 fails. The audit's
    orderings (id, target probability, ties by id) come from the target's law, not from the samples, so unlike the
    two-sample test's ranking they cannot favour either side (docs/engines.md §3)."""
    assert _zipf_audit(tmp_path, ZipfEngine(), 500, 0).passed
    assert not _zipf_audit(tmp_path, ZipfEngine(applied_temperature=0.9), 500, 0).passed


@pytest.mark.slow
def test_statistical_audit_size_on_a_real_vocabulary_against_binomial_interval(tmp_path):
    """100 samples files of 300 draws from the Zipf stand-in against its own 49k-token law: FAILs at level 0.01
    within the binomial 99% interval [0, 4]."""
    fails = sum(not _zipf_audit(tmp_path, ZipfEngine(), 300, seed).passed for seed in range(100))
    assert stats.binom.interval(0.99, 100, 0.01)[0] <= fails <= stats.binom.interval(0.99, 100, 0.01)[1], fails
