"""The draft-length policy simulator's picks (sims/policies.py) against the project's one tie rule."""


def test_best_run_against_the_shared_tie_rule():
    """Equal mean speedups: the fewest drafts win (gamma 2 over 5, cap 2 over cap 5), as ``spectheory.optimum``
    rules everywhere; a larger speedup still wins (the control)."""
    from types import SimpleNamespace

    from sims.policies import _best

    def runs(means: dict) -> dict:
        return {key: SimpleNamespace(speedup=lambda c, m=m: SimpleNamespace(mean=m)) for key, m in means.items()}

    assert _best(runs({5: 1.5, 2: 1.5, 3: 1.2}), 0.1)[0] == 2
    assert _best(runs({(0.9, 5): 1.5, (0.5, 2): 1.5}), 0.1)[0] == (0.5, 2)
    assert _best(runs({5: 1.6, 2: 1.5}), 0.1)[0] == 5
