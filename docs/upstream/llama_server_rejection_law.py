#!/usr/bin/env python3
"""The output law of llama.cpp's speculative verifiers under Mirostat 2 and adaptive-p, computed exactly on the
smallest case: three tokens, a target whose probabilities are the same at every position, one drafted token a
round, three tokens generated. Standard library only; no model, no server. Usage: python3 llama_server_rejection_law.py

Every random draw is enumerated, so each law below is exact (to float rounding); plain decoding's law is the
expected one. The samplers follow src/llama-sampler.cpp (llama.cpp b11434): Mirostat 2's apply truncates to the
tokens of surprise -log2 p <= mu, renormalises, draws, and moves mu by the drawn token's surprise; adaptive-p's apply
transforms the logits around 2 * target - weighted_sum / total_weight, draws, and keeps the drawn token as pending,
and its accept moves the average only when the accepted token is the pending one. The verifiers follow
common/sampling.cpp: the match path emits the chain's own draw; the rejection path
(common_sampler_sample_and_accept_n_rejection) runs the chain at each drafted position (which draws and moves the
state), then emits the draft with probability min(1, p/q) or a draw from norm(max(0, p - q)), and calls accept with
the emitted token.
"""

import math

P = (0.6, 0.3, 0.1)  # the target's probabilities at every position
Q = (0.2, 0.3, 0.5)  # the draft's
HORIZON = 3


def mirostat_dist(mu):
    """The truncated, renormalised distribution Mirostat 2 draws from at ``mu``."""
    order = sorted(range(len(P)), key=lambda token: -P[token])
    kept = [token for token in order if -math.log2(P[token]) <= mu] or order[:1]
    total = sum(P[token] for token in kept)
    return tuple(P[token] / total if token in kept else 0.0 for token in range(len(P)))


def mirostat(patched, tau, eta):
    """(initial state, dist, after apply drew y, after accept of z) for Mirostat 2 at ``tau``, ``eta``."""

    def dist(state):
        return mirostat_dist(state[0])

    def drawn(state, y):  # as shipped, mu moves inside apply, by the drawn token
        p = dist(state)
        return (state[0], p) if patched else (state[0] - eta * (-math.log2(p[y]) - tau), None)

    def accepted(state, z):  # patched: mu moves in accept, by the emitted token, under the kept distribution
        return (state[0] - eta * (-math.log2(state[1][z]) - tau), None) if patched else state

    return (2 * tau, None), dist, drawn, accepted


def adaptive_p(patched):
    """The same for adaptive-p at target 0.5, decay 0 (the average is the last emitted token's probability)."""
    target, decay = 0.5, 0.0

    def dist(state):
        weighted_sum, total_weight = state[0], state[1]
        adapted = min(1.0, max(0.0, target if total_weight == 0 else 2 * target - weighted_sum / total_weight))
        logits = []
        for p in P:
            d = abs(p - adapted) / 0.3
            logits.append(5.0 - 10.0 * d * d / (1.0 + d))
        top = max(logits)
        weights = [math.exp(logit - top) for logit in logits]
        return tuple(w / sum(weights) for w in weights)

    def drawn(state, y):
        return state[0], state[1], y

    def accepted(state, z):  # as shipped: only when z is the pending token
        if patched or state[2] == z:
            return P[z] + decay * state[0], 1.0 + decay * state[1], None
        return state[0], state[1], None

    return (target / (1 - decay), 1 / (1 - decay), None), dist, drawn, accepted


def residual(p):
    """norm(max(0, p - Q)) before normalising: the rejection path's residual."""
    return [max(0.0, pk - qk) for pk, qk in zip(p, Q)]


def plain_law(sampler, state, prefix, weight, law):
    """Plain decoding: draw from the chain, accept the drawn token."""
    if len(prefix) == HORIZON:
        law[prefix] = law.get(prefix, 0.0) + weight
        return
    _, dist, drawn, accepted = sampler
    for y, p in enumerate(dist(state)):
        if p > 0:
            plain_law(sampler, accepted(drawn(state, y), y), prefix + (y,), weight * p, law)


def speculative_law(sampler, verifier, state, prefix, weight, law):
    """One drafted token x ~ Q a round, verified by ``verifier`` ('match' or 'rejection'), then the bonus token."""
    if len(prefix) == HORIZON:
        law[prefix] = law.get(prefix, 0.0) + weight
        return
    _, dist, drawn, accepted = sampler
    p = dist(state)
    for x, qx in enumerate(Q):
        for y, py in enumerate(p):
            if py == 0:
                continue
            after_draw = drawn(state, y)
            if verifier == "match":  # the chain's own draw is emitted; the draft is kept when it equals it
                outcomes = [(y, 1.0, y == x)]
            else:
                accept = min(1.0, p[x] / qx)
                rest = residual(p)
                outcomes = [(x, accept, True)] + [
                    (z, (1 - accept) * r / sum(rest), False) for z, r in enumerate(rest) if r > 0 and accept < 1
                ]
            for z, chance, draft_kept in outcomes:
                if chance == 0:
                    continue
                state_z, prefix_z, weight_z = accepted(after_draw, z), prefix + (z,), weight * qx * py * chance
                if draft_kept and len(prefix_z) < HORIZON:  # the bonus token: a plain draw from the chain
                    for b, pb in enumerate(dist(state_z)):
                        if pb > 0:
                            speculative_law(
                                sampler, verifier, accepted(drawn(state_z, b), b), prefix_z + (b,), weight_z * pb, law
                            )
                else:
                    speculative_law(sampler, verifier, state_z, prefix_z, weight_z, law)


def compared(law, expected):
    keys = sorted(set(law) | set(expected))
    worst = max(keys, key=lambda k: abs(law.get(k, 0.0) - expected.get(k, 0.0)))
    gap = abs(law.get(worst, 0.0) - expected.get(worst, 0.0))
    tv = 0.5 * sum(abs(law.get(k, 0.0) - expected.get(k, 0.0)) for k in keys)
    where = f" at {worst}: {law.get(worst, 0.0):.4f} for {expected.get(worst, 0.0):.4f}" if gap > 1e-9 else ""
    return f"total mass {sum(law.values()):.12f}, max |law - plain| {gap:.3g}{where}, total variation {tv:.3g}"


def fixed_uniform_law(u):
    """The first verified token's law when the acceptance uniform and the residual's uniform are the constant u (a
    verifier rng seeded the same in every request), target p = P, draft q = Q: the law over requests."""
    law = [0.0] * len(P)
    for x, qx in enumerate(Q):
        if P[x] >= Q[x] or u < P[x] / qx:
            law[x] += qx
            continue
        rest = residual(P)
        target, z = u * sum(rest), len(rest) - 1
        for k, r in enumerate(rest):
            target -= r
            if r > 0 and target <= 0:
                z = k
                break
        law[z] += qx
    return law


def main():
    print(f"target p = {P} at every position, draft q = {Q}, one drafted token a round, {HORIZON} tokens")
    for name, make in (
        ("Mirostat 2, tau 1.5, eta 2", lambda patched: mirostat(patched, 1.5, 2.0)),
        ("Mirostat 2 at llama.cpp's defaults, tau 5, eta 0.1", lambda patched: mirostat(patched, 5.0, 0.1)),
        ("adaptive-p, target 0.5, decay 0", adaptive_p),
    ):
        print(f"{name}:")
        expected = {}
        plain_law(make(False), make(False)[0], (), 1.0, expected)
        for label, verifier, patched in (
            ("match path (the default verifier)", "match", False),
            ("rejection path, as shipped", "rejection", False),
            ("rejection path, patched", "rejection", True),
        ):
            law = {}
            speculative_law(make(patched), verifier, make(patched)[0], (), 1.0, law)
            print(f"    {label}: {compared(law, expected)}")
    print(
        "a verifier rng seeded the same in every request (adaptive-p's chain reports no seed), first verified "
        f"token, target p = {P}:"
    )
    for u in (0.1, 0.5, 0.9):
        law = fixed_uniform_law(u)
        print(
            f"    uniforms fixed at {u}: law {tuple(round(v, 4) for v in law)}, total variation "
            f"{0.5 * sum(abs(a - b) for a, b in zip(law, P)):.3g}"
        )
    grid = [fixed_uniform_law((i + 0.5) / 10000) for i in range(10000)]
    mean = [sum(law[k] for law in grid) / len(grid) for k in range(len(P))]
    print(
        f"    uniforms drawn afresh (mean over 10,000 values of u): law {tuple(round(v, 4) for v in mean)}, "
        f"total variation {0.5 * sum(abs(a - b) for a, b in zip(mean, P)):.3g}"
    )


if __name__ == "__main__":
    main()
