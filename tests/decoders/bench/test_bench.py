"""The speed harness and alpha measurement on tiny models: structure and arithmetic, never timings."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from bench_inputs import SETTINGS, V, tiny
from committed_results import RESULTS, committed_rows, misread

from decoders.bench.alpha import (
    LENIENCES,
    AlongText,
    CountedRuns,
    accepted_and_verified,
    alpha_markdown,
    alpha_under_lenience,
    betas_along_text,
    engine_metrics,
    estimate_alpha,
)
from decoders.bench.bench import BenchSettings, bench_batches, bench_pair, ratio_standard_error, timed
from decoders.bench.documents import BenchDocument
from decoders.bench.hf_compare import hf_comparison
from decoders.bench.inputs import Pair
from decoders.bench.profile import acceptance_by_position, counts_by_row, outcomes_along_text
from decoders.bench.prompts import text_windows
from decoders.bench.rows import AlphaEstimate, EngineWords
from decoders.grammar import GrammarSpec
from decoders.models.history import CopyDraft, TabularModel
from decoders.randomness import seeded
from decoders.sampling import GREEDY, Sampling, adjusted_probs
from decoders.speculative import SpeculativeConfig, generate_speculative
from spectheory.acceptance import acceptance_probability
from spectheory.costs import CostProfile
from spectheory.metrics import mean_acceptance_length_from_per_position
from spectheory.speedup import walltime_improvement


def test_bench_report_against_theorem_3_8():
    """Rows for every (temperature, gamma); the prediction is Theorem 3.8 at the pooled alpha and measured c."""
    target, draft = tiny(32, 2, 0), tiny(16, 1, 1)
    prompts = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    report = bench_pair(Pair(target, draft), prompts, SETTINGS, progress=False)
    assert [(row.temperature, row.gamma) for row in report.rows] == [(0.0, 1), (0.0, 3), (1.0, 1), (1.0, 3)]
    assert report.c == pytest.approx(report.draft_call_seconds / report.target_call_seconds)
    for row in report.rows:
        assert 1 <= row.tokens_per_iteration <= row.gamma + 1
        assert row.speedup == pytest.approx(report.autoregressive_seconds[row.temperature] / row.seconds)
        alpha = report.alpha[row.temperature]
        assert row.predicted_speedup == pytest.approx(float(walltime_improvement(alpha, row.gamma, report.c)))
        assert row.predicted_from_tokens == pytest.approx(row.tokens_per_iteration / (row.gamma * report.c + 1))
        assert row.speedup_spread[0] <= row.speedup_spread[1] <= row.speedup_spread[2]
        profile = CostProfile.from_dict(report.profiles[row.temperature])
        assert profile.gamma_max == 3 and row.calibrated_speedup == pytest.approx(
            profile.speedup(row.gamma, tokens=SETTINGS.max_new_tokens)
        )
        # The engines' names (docs/metrics.md): the same counts, converted.
        assert row.mean_acceptance_length == pytest.approx(row.tokens_per_iteration)
        assert row.mean_acceptance_length == pytest.approx(
            mean_acceptance_length_from_per_position(row.per_position_acceptance_rate)
        )
        assert row.acceptance_rate == pytest.approx((row.mean_acceptance_length - 1) / row.gamma)
        assert row.speedup_standard_error > 0 and isinstance(row.calibrated_within, bool)
    for temperature, costs in report.autoregressive.items():
        assert costs["seconds_per_token"] == CostProfile.from_dict(report.profiles[temperature]).t_step
        low, high = costs["over_target_call_spread"]
        assert low <= costs["over_target_call"] <= high and costs["target_call_seconds"] > 0
        assert 0 < costs["efficiency"] <= 1
    assert all(0 < row.efficiency <= 1 for row in report.rows)  # phase-timed on CPU
    document = json.loads(json.dumps(report.as_dict(), allow_nan=False))
    assert {"device", "dtype", "torch"} <= set(document["environment"])
    assert document["settings"]["repeats"] == 2 and document["best"]["0.0"]["gamma"] in (1, 3)


def test_bench_lines_against_every_committed_sweep():
    """``bench_lines`` prints a document read back from its JSON (temperature keys as strings): every committed chain
    sweep gives a line per row and, per temperature, its best gamma with the document's pooled alpha. The control is
    the same document with its temperatures' alphas dropped, which must fail to print."""
    from decoders.bench.bench_lines import bench_lines

    sweeps = [
        document
        for path in sorted(RESULTS.rglob("*.json"))
        for document in [json.loads(path.read_text())]
        if isinstance(document, dict) and {"rows", "profiles", "best", "alpha"} <= set(document)
    ]
    assert len(sweeps) >= 10
    for document in sweeps:
        lines = bench_lines(BenchDocument.from_dict(document))
        for temperature, alpha in document["alpha"].items():
            best = f"T = {float(temperature):g}: best gamma {document['best'][temperature]['gamma']}, "
            assert any(line.startswith(best) and f"pooled alpha {alpha:.3f};" in line for line in lines), best
    with pytest.raises(KeyError):
        bench_lines(BenchDocument.from_dict({**sweeps[0], "alpha": {}}))


def test_bench_sampling_against_a_grammar_that_forces_every_token():
    """The bench decodes under its ``sampling`` at every temperature: a grammar that allows one token (100 "a"s;
    12 are decoded) makes the two random models agree on every draft, so every iteration accepts all its drafts
    (alpha 1), which the unconstrained pair does not (the negative control); the settings record the sampling."""
    target, draft = tiny(32, 2, 0), tiny(16, 1, 1)
    prompts = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    forced = Sampling(1.0, repetition_penalty=1.3, stop=(V - 1,), grammar=GrammarSpec("regex", "a{100}")).bound(None, V)
    report = bench_pair(Pair(target, draft), prompts, replace(SETTINGS, sampling=forced), progress=False)
    assert all(alpha == 1.0 for alpha in report.alpha.values()), report.alpha
    assert min(bench_pair(Pair(target, draft), prompts, SETTINGS, progress=False).alpha.values()) < 0.9
    settings = json.loads(json.dumps(report.as_dict(), allow_nan=False))["settings"]["sampling"]
    assert settings["grammar"] == {"kind": "regex", "source": "a{100}"} and settings["repetition_penalty"] == 1.3


def test_bench_with_the_draft_as_target_accepts_everything():
    """A draft equal to the target: alpha = 1 and gamma + 1 tokens per iteration at T = 0 and T = 1."""
    target = tiny(16, 1, 0)
    prompts = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    report = bench_pair(Pair(target, target), prompts, SETTINGS, progress=False)
    assert report.alpha == {0.0: 1.0, 1.0: 1.0}
    # max_new_tokens = 12 is a multiple of neither 2 nor 4: the last iteration is cut short, not rejected.
    assert all(row.tokens_per_iteration > row.gamma for row in report.rows)
    profile = CostProfile.from_dict(report.profiles[1.0])
    assert profile.acceptance == (1.0, 1.0, 1.0) and profile.alpha == 1.0
    assert all(set(text) == {1.0} for text in profile.acceptance_along_text)  # untested positions: alpha = 1


def test_profile_acceptance_against_counts():
    """a_i and the outcomes along text, from accepted counts per iteration at gamma = 4."""
    assert acceptance_by_position([2, 0, 4, 1], 4) == (3 / 4, 2 / 3, 1 / 2, 1.0)
    assert acceptance_by_position([0, 0], 2) == (0.0, 0.0)
    assert outcomes_along_text([2, 4, 0], 4, 20, 0.5) == (1, 1, 0, 1, 1, 1, 1, 0.5, 0)
    assert outcomes_along_text([2, 4, 0], 4, 4, 0.5) == (1, 1, 0, 1)


def test_profile_verify_widths_against_the_runs_phases():
    """The profile's t_verify(k) is the verify call timed at every width, shifted so that the decoding runs'
    verify phases are met on average at the widths they verified; the copy draft's proposal fractions come
    from the runs at gamma_max. The first call of every run carries the prompt: the autoregressive run's
    first step (its "prefill" phase, 3 s) is t_step (1 s) and the prompt's 2 s, which come off the
    speculative runs' verify phases (control: left on, they would shift t_verify by 0.5 s more)."""
    from decoders.bench.profile import ProfileRecorder
    from decoders.results import DecodeStats

    def run(gamma, verify, proposed):
        verify += 2.0  # the prompt, carried by the first verify call
        return DecodeStats(
            iterations=len(proposed),
            target_calls=len(proposed),
            draft_calls=0,
            accepted_per_iteration=tuple((0,) for _ in proposed),
            betas=(),
            seconds={"prefill": 0.0, "draft": 0.0, "verify": verify, "total": verify + 1.0},
            proposed_per_iteration=tuple((m,) for m in proposed),
        )

    recorder = ProfileRecorder(2, 4, {"autoregressive": 1, ("speculative", 1): 1, ("speculative", 2): 1}, 0, {})
    recorder.add(
        "autoregressive",
        DecodeStats(
            iterations=4,
            target_calls=4,
            draft_calls=0,
            accepted_per_iteration=(),
            betas=(),
            seconds={"prefill": 3.0, "total": 6.0},
        ),
    )
    recorder.add(("speculative", 1), run(1, 4 * 2.5, (1, 1, 1, 1)))  # 2.5 s against calls of 2 s: +0.5
    recorder.add(("speculative", 2), run(2, 4 * 2.0, (0, 2, 0, 2)))  # mean of 1 s and 3 s: 2 s, +0.0
    recorder.add_widths({1: 1.0, 2: 2.0, 3: 3.0})
    profile = recorder.profile()
    assert profile.t_verify == (1.25, 2.25, 3.25) and profile.proposal_fractions == (0.5, 0.0, 0.5)
    assert profile.verify_seconds(1) == 0.5 * 1.25 + 0.5 * 2.25
    assert recorder.spread()["verify_offset"] == [0.25, 0.25, 0.25]
    assert (profile.t_step, profile.target_prefill) == (1.0, 2.0)


def test_profile_overhead_against_the_runs_between():
    """Draft-and-rest seconds per iteration measured at gamma 1, 3 and 4 (1.0, 2.0 and 2.2 s): the profile's
    t_overhead holds them and interpolates gamma 2 (1.5 s), and an iteration at gamma 3 costs 2.0 s plus its
    verify call. Control: the line through gamma 1 and 4 alone (t_draft 0.4, t_iteration 0.6) says 1.8 s."""
    from decoders.bench.profile import ProfileRecorder
    from decoders.results import DecodeStats
    from spectheory.costs import CostProfile

    def run(gamma, overhead):
        return DecodeStats(
            iterations=4,
            target_calls=4,
            draft_calls=0,
            accepted_per_iteration=tuple((gamma,) for _ in range(4)),
            betas=(),
            seconds={"prefill": 0.0, "draft": 4 * overhead / 2, "verify": 4.0, "total": 4 * (overhead + 1)},
            proposed_per_iteration=tuple((gamma,) for _ in range(4)),
        )

    calls = {"autoregressive": 1, ("speculative", 1): 1, ("speculative", 3): 1, ("speculative", 4): 1}
    recorder = ProfileRecorder(4, 20, calls, 0, {})
    recorder.add(
        "autoregressive",
        DecodeStats(
            iterations=20,
            target_calls=20,
            draft_calls=0,
            accepted_per_iteration=(),
            betas=(),
            seconds={"prefill": 1.0, "total": 20.0},
        ),
    )  # t_step 1 s
    for gamma, overhead in ((1, 1.0), (3, 2.0), (4, 2.2)):
        recorder.add(("speculative", gamma), run(gamma, overhead))
    recorder.add_widths({k: 1.0 for k in range(1, 6)})
    profile = recorder.profile()
    assert profile.t_overhead == pytest.approx((1.0, 1.5, 2.0, 2.2))
    assert profile.iteration_seconds(3) == pytest.approx(2.0 + profile.verify_seconds(3))
    assert profile.overhead_seconds(6) == pytest.approx(2.2 + 2 * 0.4)  # past gamma_max: t_draft per token
    line = CostProfile.from_dict({key: value for key, value in profile.as_dict().items() if key != "t_overhead"})
    assert (line.t_draft, line.t_iteration) == pytest.approx((0.4, 0.6))
    assert line.iteration_seconds(3) == pytest.approx(1.8 + profile.verify_seconds(3))
    assert CostProfile.from_dict(profile.as_dict()) == profile


def test_timed_counts_warmup_and_repeats():
    calls = []
    timing = timed(lambda: calls.append(1), repeats=3, warmup=2, device="cpu")
    assert len(calls) == 5 and len(timing.seconds) == 3 and timing.median == sorted(timing.seconds)[1]
    summary = timing.as_dict()
    assert summary["min_seconds"] <= summary["median_seconds"] <= summary["max_seconds"]


def test_bench_settings_reject_bad_values():
    with pytest.raises(ValueError, match="gammas"):
        BenchSettings(gammas=(0,))
    with pytest.raises(ValueError, match="repeats"):
        BenchSettings(repeats=0)
    with pytest.raises(ValueError, match="temperatures"):
        BenchSettings(temperatures=(-1.0,))
    with pytest.raises(ValueError, match=r"batch_sizes must be an integer in \[1, 1024\], got 0"):
        BenchSettings(batch_sizes=(0,))
    with pytest.raises(ValueError, match="batch_gammas must not be empty"):
        BenchSettings(batch_gammas=())
    assert [BenchSettings(prompts=8).batch_prompts(b) for b in (1, 3, 16)] == [8, 9, 16]


def test_batch_sweep_against_its_cost_profiles():
    """At each batch size: whole batches of at least ``prompts`` prompts, rows at every batch gamma, the
    prediction from the profile measured at that batch size, efficiencies in (0, 1]."""
    target, draft = tiny(32, 2, 0), tiny(16, 1, 1)
    prompts = torch.randint(0, V, (4, 8), generator=torch.Generator().manual_seed(0))
    settings = BenchSettings(
        gammas=(1,),
        temperatures=(0.0, 1.0),
        prompts=2,
        prompt_length=8,
        max_new_tokens=12,
        repeats=1,
        warmup=0,
        call_steps=4,
        batch_sizes=(1, 4),
        batch_gammas=(2, 3),
    )
    sweep = bench_batches(Pair(target, draft), prompts, settings, progress=False).as_dict()
    keys = [(row["batch_size"], row["temperature"], row["gamma"], row["prompts"]) for row in sweep["rows"]]
    assert keys == [(b, t, g, max(b, 2)) for b in (1, 4) for t in (0.0, 1.0) for g in (2, 3)]
    for row in sweep["rows"]:
        profile = CostProfile.from_dict(sweep["profiles"][f"{row['batch_size']},{row['temperature']:g}"])
        assert profile.batch_size == row["batch_size"] and profile.gamma_max == 3
        assert row["calibrated_speedup"] == pytest.approx(profile.speedup(row["gamma"], tokens=12))
        assert row["tokens_per_second"] == pytest.approx(row["prompts"] * 12 / row["seconds"])
        assert 0 < row["efficiency"] <= 1 and 0 < row["autoregressive_efficiency"] <= 1
    json.dumps(sweep, allow_nan=False)
    with pytest.raises(ValueError, match="the batch sweep needs 4 prompts, got 3"):
        bench_batches(Pair(target, draft), prompts[:3], settings, progress=False)


def test_counts_by_row_against_rows_decoded_alone():
    """Per-row accepted counts recovered from a batch's ``accepted_per_iteration`` (finished rows drop out)
    equal each row's counts decoded on its own (greedy, exact tables: batching changes nothing)."""
    table = torch.randn(V, V, generator=torch.Generator().manual_seed(0))
    guesses = table.clone()
    guesses[10:] = torch.randn(10, V, generator=torch.Generator().manual_seed(1))  # right after tokens < 10 only
    target, draft = TabularModel(table, 1), TabularModel(guesses, 1)
    prompts = [[1, 7], [3], [4, 5, 10]]  # 3, 6 and 10 iterations alone
    config = SpeculativeConfig(3, GREEDY)
    batch = generate_speculative(target, draft, prompts, max_new_tokens=10, config=config, randomness=seeded(0))
    alone = [
        [
            n
            for step in generate_speculative(
                target, draft, [prompt], max_new_tokens=10, config=config, randomness=seeded(0)
            ).stats.accepted_per_iteration
            for n in step
        ]
        for prompt in prompts
    ]
    assert counts_by_row(batch.stats.accepted_per_iteration, 3, 10) == alone
    assert len({len(row) for row in alone}) > 1  # the rows finish at different iterations


def test_batch_iterations_against_slowest_row():
    """At batch size b the cost model charges each batch its slowest row's iterations."""
    quick, slow = (1.0,) * 6, (0.0,) * 6  # at gamma 2: 2 iterations (3 tokens each), and 6
    single = CostProfile(1.0, 0.1, (1.0, 1.0, 1.0), 0.0, (0.5, 0.5), acceptance_along_text=(quick, slow))
    paired = CostProfile(1.0, 0.1, (1.0, 1.0, 1.0), 0.0, (0.5, 0.5), acceptance_along_text=(quick, slow), batch_size=2)
    assert single.tokens_per_iteration(2) == pytest.approx(12 / 8)
    assert paired.tokens_per_iteration(2) == pytest.approx(6 / 6)
    assert CostProfile.from_dict(paired.as_dict()) == paired
    with pytest.raises(ValueError, match="whole batches of 2 texts, got 3"):
        CostProfile(1.0, 0.1, (1.0, 1.0, 1.0), 0.0, (0.5, 0.5), acceptance_along_text=(quick,) * 3, batch_size=2)


def test_hf_comparison_rows_against_every_committed_file():
    """The HF comparison's row (decoders.bench.rows.HFComparisonRow) reads every such row committed under results/
    with its flat keys and values, and its ratio is the one the document holds. Control: a key of no runner field
    is refused."""
    from decoders.bench.rows import HFComparisonRow

    rows = committed_rows("rows", frozenset({"ar_hf_generate_seconds"}))
    assert len(rows) >= 11, len(rows)
    assert misread(HFComparisonRow, rows) == []
    row = HFComparisonRow.from_dict(rows[0])
    assert row.ours_over_hf("ar") == (rows[0]["ar_ours_adapter_over_hf"], rows[0]["ar_ours_adapter_over_hf_spread"])
    with pytest.raises(TypeError, match="unknown key 'ar_hf_generate_tokens'"):
        HFComparisonRow.from_dict(dict(rows[0], ar_hf_generate_tokens=3))


def test_hf_comparison_against_our_greedy_decoders():
    pytest.importorskip("transformers")
    target, draft = tiny(32, 2, 0), tiny(16, 1, 1)
    prompts = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    settings = BenchSettings(
        gammas=(2,), temperatures=(0.0,), prompts=2, prompt_length=8, max_new_tokens=10, repeats=1, warmup=0
    )
    result = hf_comparison(target, draft, prompts, settings, gamma=2, progress=False)
    row = result.rows[0]
    assert row.greedy_outputs_agree is True  # HF generate, assisted generation and ours: the same tokens
    assert row.over_hf["ar_ours_adapter"] > 0


def test_hf_comparison_of_a_model_target_with_a_tinygpt_draft_against_our_greedy_decoders():
    """A Hugging Face target with a TinyGPT draft (as SmolLM2 with its distilled draft): transformers is assisted by
    the draft converted to GPT-2, and its assisted generation gives our greedy tokens, with the target's calls
    padded to wider ones and without (timed beside them)."""
    pytest.importorskip("transformers")
    from decoders.models.hf import HFCausalLM, tinygpt_to_gpt2

    target, draft = HFCausalLM(tinygpt_to_gpt2(tiny(32, 2, 0))), tiny(16, 1, 1)
    target.padded_widths = {1: 2, 3: 5}
    prompts = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    settings = BenchSettings(
        gammas=(2,), temperatures=(0.0,), prompts=2, prompt_length=8, max_new_tokens=10, repeats=1, warmup=0
    )
    result = hf_comparison(target, draft, prompts, settings, gamma=2, progress=False)
    assert result.assisted == ["assistant", "assistant_tokens"] and result.padded_widths == {1: 2, 3: 5}
    row = result.rows[0]
    assert row.greedy_outputs_agree is True and row.over_hf["speculative_ours_adapter"] > 0
    assert row.over_hf["speculative_ours_unpadded"] > 0 and target.padded_widths == {1: 2, 3: 5}


def test_tinygpt_to_gpt2_against_tinygpt_logits():
    pytest.importorskip("transformers")
    from decoders.models.hf import tinygpt_to_gpt2

    model = tiny(32, 2, 3)
    tokens = torch.randint(0, V, (2, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(tinygpt_to_gpt2(model)(tokens).logits, model.logits_of_sequences(tokens), atol=1e-5)


def unigram(seed, sharpness=1.0):
    """A context-free tabular model: the same next-token law at every position, so alpha is one number."""
    return TabularModel.random(torch.Generator().manual_seed(seed), V, 0, sharpness=sharpness, dtype=torch.float32)


def test_alpha_along_text_against_sum_of_minimums():
    target, draft = unigram(0), unigram(1)
    p = torch.softmax(target.table[0], -1)
    q = torch.softmax(draft.table[0], -1)
    windows = torch.randint(0, V, (3, 16), generator=torch.Generator().manual_seed(0))
    betas, proposed = betas_along_text(target, draft, windows, Sampling(1.0), skip=4)
    assert betas.shape == (3, 12) and bool(proposed.all())
    assert torch.allclose(betas, torch.minimum(p, q).sum().expand(3, 12), atol=1e-6)
    greedy, _ = betas_along_text(target, draft, windows, GREEDY, skip=4)
    assert bool((greedy == float(p.argmax() == q.argmax())).all())  # T = 0: 1 where the argmaxes agree


def test_alpha_under_lenience_against_theory():
    """beta_l = sum min(p / l, q) along text equals ``spectheory.acceptance.acceptance_probability``, and the
    Table 5 rows grow as l shrinks; a lenience outside (0, 1] is refused."""
    target, draft = unigram(0), unigram(1)
    p, q = (torch.softmax(model.table[0], -1).double().numpy() for model in (target, draft))
    stream = torch.randint(0, V, (400,), generator=torch.Generator().manual_seed(0)).numpy()
    [row] = alpha_under_lenience(target, {"unigram": draft}, stream, LENIENCES, AlongText(windows=4, length=32, skip=4))
    expected = [float(acceptance_probability(p, q, lenience=lenience)) for lenience in LENIENCES]
    assert row.leniences == list(LENIENCES)
    assert row.alpha == pytest.approx(expected, abs=1e-5)
    assert row.alpha == sorted(row.alpha) and row.alpha[-1] > row.alpha[0]
    with pytest.raises(ValueError, match="lenience"):
        betas_along_text(target, draft, torch.zeros(1, 8, dtype=torch.int64), Sampling(1.0), skip=2, lenience=0.0)


def test_alpha_along_text_counts_no_proposal_as_zero():
    windows = torch.tensor([[1, 2, 3, 1, 2, 5, 6, 7]])
    betas, proposed = betas_along_text(unigram(0), CopyDraft(V), windows, GREEDY, skip=1)
    # The copy draft proposes only where the context's last token occurred before: after 1 2 3 1 and 1 2 3 1 2.
    assert proposed.tolist()[0] == [False, False, False, True, True, False, False]
    assert bool((betas[~proposed] == 0).all())


def test_alpha_from_acceptance_counts_against_sum_of_minimums():
    """Context-free models make acceptance i.i.d. Bernoulli(alpha): the count estimate must cover alpha.
    The check is at 4.5 standard errors (false-positive probability about 1e-5)."""
    target, draft = unigram(0, 2.0), unigram(1, 2.0)
    alpha = float(
        torch.minimum(
            adjusted_probs(target.table[0], Sampling(1.0)), adjusted_probs(draft.table[0], Sampling(1.0))
        ).sum()
    )
    prompts = torch.zeros(64, 2, dtype=torch.int64)
    generation = generate_speculative(
        target, draft, prompts, max_new_tokens=40, config=SpeculativeConfig(3, Sampling(1.0)), randomness=seeded(0)
    )
    accepted, verified = accepted_and_verified(generation.stats, 3)
    estimate = accepted / verified
    assert abs(estimate - alpha) < 4.5 * math.sqrt(alpha * (1 - alpha) / verified), (estimate, alpha)
    # Negative control: accepted per drafted token, accepted / (gamma * iterations), ignores that a rejection
    # ends the iteration; it is biased low and must fall outside the same band. It is the engines' acceptance rate.
    naive = accepted / (3 * sum(len(row) for row in generation.stats.accepted_per_iteration))
    assert alpha - naive > 4.5 * math.sqrt(alpha * (1 - alpha) / verified), (naive, alpha)
    assert engine_metrics([generation], 3).acceptance_rate == pytest.approx(naive)


def test_estimate_alpha_and_markdown_table():
    target, draft = unigram(0), unigram(1)
    stream = np.random.default_rng(0).integers(0, V, 2000).astype(np.uint8)
    estimate = estimate_alpha(
        Pair(target, draft),
        "unigram",
        stream,
        AlongText(temperature=1.0, windows=4, length=32, skip=4, batch_size=2),
        CountedRuns(prompts=4, prompt_length=8, max_new_tokens=16),
    )
    assert estimate.text_positions == 4 * 28 and estimate.proposal_coverage == 1.0
    assert estimate.generated_tokens == 4 * 16 and estimate.verified_tokens >= estimate.accepted_tokens
    # The engines' words for the same runs (docs/metrics.md): tokens per target call from the per-position rates
    assert estimate.mean_acceptance_length == pytest.approx(1 + sum(estimate.per_position_acceptance_rate))
    assert estimate.acceptance_rate == pytest.approx(sum(estimate.per_position_acceptance_rate) / estimate.gamma)
    assert AlphaEstimate.from_dict(json.loads(json.dumps(estimate.as_dict()))) == estimate
    old_file = {k: v for k, v in estimate.as_dict().items() if k not in EngineWords.__dataclass_fields__}
    assert AlphaEstimate.from_dict(old_file).acceptance_rate is None  # files written before these names still load
    table = alpha_markdown([estimate])
    assert table.count("\n") == 3 and f"{estimate.alpha_text:.3f}" in table
    assert text_windows(stream, 3, 10, 0).tolist() == text_windows(stream, 3, 10, 0).tolist()
    with pytest.raises(ValueError, match="fewer than a window of 5000"):
        text_windows(stream, 1, 5000, 0)


def test_ratio_standard_error_against_simulation():
    """The speedup's standard error over prompts (sum of autoregressive over sum of speculative seconds) matches
    the spread of that ratio over 4000 simulated prompt sets of 8 (prompt lengths vary, the speedup per prompt
    varies around 1.5): the mean SE within 15% of the empirical SD (seeded; the Monte-Carlo error of both is
    about 2%). Control: the SE of the autoregressive sum alone, scaled like a ratio, misses by more."""
    rng = np.random.default_rng(0)
    speculative = rng.uniform(1.0, 3.0, size=(4000, 8))  # seconds per prompt
    autoregressive = speculative * rng.normal(1.5, 0.2, size=(4000, 8))
    ratios = autoregressive.sum(axis=1) / speculative.sum(axis=1)
    errors = [ratio_standard_error(list(a), list(b)) for a, b in zip(autoregressive, speculative)]
    assert abs(np.mean(errors) / np.std(ratios) - 1) < 0.15
    wrong = [np.std(a, ddof=1) / np.sqrt(len(a)) / np.mean(b) for a, b in zip(autoregressive, speculative)]
    assert abs(np.mean(wrong) / np.std(ratios) - 1) > 0.5
    assert ratio_standard_error([1.0], [2.0]) is None


def test_bench_rows_against_every_committed_file():
    """The bench's row format (decoders.bench.rows.BenchRow) reads every chain sweep row committed under results/,
    each vintage's keys with their values (fields added since are None), so the format written down is the one
    the files hold. Control: a row with a key the format does not know is refused."""
    from decoders.bench.rows import BenchRow

    rows = committed_rows("rows", frozenset({"tokens_per_iteration", "speedup", "iterations", "gamma"}))
    assert len(rows) >= 400, len(rows)
    assert misread(BenchRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'speedup_ratio'"):
        BenchRow.from_dict(dict(rows[0], speedup_ratio=1.0))


def test_bench_rows_against_their_document():
    """A sweep's rows are BenchRows in memory and the same keys and values in its document, both ways."""
    from decoders.bench.rows import BenchRow

    target, draft = tiny(32, 2, 0), tiny(16, 1, 1)
    prompts = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    report = bench_pair(Pair(target, draft), prompts, SETTINGS, progress=False, greedy=[[0] * 12, [0] * 12])
    document = json.loads(json.dumps(report.as_dict(), allow_nan=False))
    assert all(isinstance(row, BenchRow) for row in report.rows)
    assert [BenchRow.from_dict(row) for row in document["rows"]] == list(report.rows)
    assert "greedy_equal" in document["rows"][0] and "batch_size" not in document["rows"][0]


def test_blockwise_rows_against_every_committed_file():
    """The blockwise bench's row (decoders.bench.rows.BlockwiseRow) reads every such row committed under results/
    with its values. Control: an unknown key is refused."""
    from decoders.bench.rows import BlockwiseRow

    rows = committed_rows("rows", frozenset({"mean_block_size"}))
    assert len(rows) >= 5, len(rows)
    assert misread(BlockwiseRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        BlockwiseRow.from_dict(dict(rows[0], odd=1))


def test_cross_vocabulary_rows_against_every_committed_file():
    """The cross-vocabulary bench's rows (decoders.bench.rows.CrossVocabularyRow: the methods' ``rows`` and the
    same-tokenizer drafts' ``beside_rows``; TransformersRow: ``hf``) read every such row committed under results/
    with its values. Control: an unknown key is refused."""
    from decoders.bench.rows import CrossVocabularyRow, TransformersRow

    needs = frozenset({"candidates_per_draft_token"})
    crossed, beside = committed_rows("rows", needs), committed_rows("beside_rows", needs)
    theirs = committed_rows("hf", frozenset({"gamma", "seconds_spread"}))
    assert len(crossed) >= 12 and len(beside) >= 18 and len(theirs) >= 2, (len(crossed), len(beside), len(theirs))
    assert all("draft" not in row for row in crossed) and all(row["method"] == "speculative" for row in beside)
    assert misread(CrossVocabularyRow, crossed + beside) == [] and misread(TransformersRow, theirs) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        CrossVocabularyRow.from_dict(dict(beside[0], odd=1))
