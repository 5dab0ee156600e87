"""What a vLLM server's ``/metrics`` says of a run (docs/engines.md, "vLLM"): its spec-decode counters and its own
per-request timings, read as the change between two texts."""

from __future__ import annotations

from decoders.engines.counters import counts_from_vllm

__all__ = [
    "counters_of",
    "spec_counters",
    "histogram_sums",
    "histogram_counts",
    "PREFILL",
    "DECODE",
    "PREFIX_HITS",
    "ITERATION_TOKENS",
]


def counters_of(text: str, name: str) -> float:
    """The counter ``name``'s value summed over its labels in a ``/metrics`` text (0 where absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in (name, name + "_total")
    )


def spec_counters(before: str, after: str) -> dict:
    """The change of vLLM's spec-decode counters between two ``/metrics`` texts: ``num_drafts``,
    ``num_draft_tokens``, ``num_accepted_tokens`` and ``accepted_per_position`` (a list); {} without speculation."""

    def read(text: str) -> tuple:  # (drafts, draft tokens, accepted, accepted per position); zeros before any draft
        try:
            counts = counts_from_vllm(text)
        except ValueError:
            return None
        return counts.drafts, counts.draft_tokens, counts.accepted_tokens, counts.accepted_per_position

    second = read(after)
    if second is None:  # no spec-decode counters: a plain server, or a drafting one that has not drafted yet
        return {}
    first = read(before) or (0.0, 0.0, 0.0, ())
    earlier = tuple(first[3]) + (0.0,) * (len(second[3]) - len(first[3]))
    return {
        "num_drafts": int(second[0] - first[0]),
        "num_draft_tokens": int(second[1] - first[1]),
        "num_accepted_tokens": int(second[2] - first[2]),
        "accepted_per_position": [int(b - a) for a, b in zip(earlier, second[3])],
    }


def _histogram_totals(text: str, names, suffix: str) -> dict:
    """name -> the histogram ``name``'s ``suffix`` samples (``_sum``, ``_count``) summed over its labels."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = dict.fromkeys(names, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith(suffix) and sample.name[: -len(suffix)] in totals:
                totals[sample.name[: -len(suffix)]] += sample.value
    return totals


def histogram_sums(text: str, names) -> dict:
    """name -> the sum of the histogram ``name``'s observations over its labels, in a ``/metrics`` text."""
    return _histogram_totals(text, names, "_sum")


def histogram_counts(text: str, names) -> dict:
    """name -> how many observations the histogram ``name`` holds over its labels (for ``ITERATION_TOKENS``: the
    engine's iterations, one observation each)."""
    return _histogram_totals(text, names, "_count")


#: vLLM's own per-request timings (engine core timestamps, no HTTP): scheduled to first token, first to last.
PREFILL, DECODE = "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds"
PREFIX_HITS = "vllm:prefix_cache_hits"
#: Tokens an engine iteration scheduled (prompt and output), one observation per iteration.
ITERATION_TOKENS = "vllm:iteration_tokens_total"
