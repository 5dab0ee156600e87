"""Vectorised Monte-Carlo simulators that check the closed forms of ``spectheory`` (issue: simulators).

Empty for now: token-level speculative sampling, acceptance processes, timelines, dynamic-gamma
policies and blockwise decoding land here, each confirming a closed form within its confidence interval.
"""
