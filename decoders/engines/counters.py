"""Engines' counter files read into ``spectheory.metrics.EngineCounts`` (docs/metrics.md §3): vLLM's Prometheus
text (parsed by ``prometheus_client``), an SGLang response's ``meta_info``, a llama.cpp server's ``timings``."""

from __future__ import annotations

import json
from pathlib import Path

from decoders.engines.openai import is_url
from spectheory.metrics import EngineCounts

__all__ = [
    "counts_from_vllm",
    "counts_from_sglang",
    "counts_from_llama_cpp",
    "read_counts",
    "read_counts_file",
    "read_counts_url",
]


def _sum_samples(samples: list, name: str, label: str | None = None) -> dict:
    """label value (None without a label) -> sum of the counter ``name``'s samples (``name_total``, or ``name``)
    over its other labels; {} where it has none. Samples are matched by their own names: prometheus_client files
    them under ``name`` or ``name_total`` depending on how the dump's TYPE line names the counter."""
    out: dict = {}
    for sample in samples:
        if sample.name in (name, name + "_total"):
            key = sample.labels.get(label) if label else None
            out[key] = out.get(key, 0.0) + sample.value
    return out


def counts_from_vllm(text: str) -> EngineCounts:
    """vLLM's spec-decode counters from a Prometheus text dump (its ``/metrics``), summed over label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    except ValueError as error:
        raise ValueError(f"not a Prometheus text dump: {error}") from None
    values = {}
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        name = f"vllm:spec_decode_{key}"
        found = _sum_samples(samples, name)
        if not found:
            raise ValueError(f"the Prometheus dump has no {name} counter (is speculative decoding on?)")
        values[key] = found[None]
    per_position = _sum_samples(samples, "vllm:spec_decode_num_accepted_tokens_per_pos", "position")
    try:
        ordered = sorted((int(position), value) for position, value in per_position.items())
    except (TypeError, ValueError):
        raise ValueError(
            f"vLLM per-position counters need integer position labels, got {sorted(per_position)}"
        ) from None
    if [position for position, _ in ordered] != list(range(len(ordered))):
        raise ValueError(f"vLLM per-position counters must cover positions 0..k-1, got {[p for p, _ in ordered]}")
    return EngineCounts(
        "vllm",
        values["num_drafts"],
        values["num_draft_tokens"],
        values["num_accepted_tokens"],
        tuple(value for _, value in ordered),
    )


def counts_from_sglang(document: dict) -> EngineCounts:
    """SGLang's counters from a response (or its ``meta_info``): verify rounds, drafted and accepted tokens."""
    meta = document.get("meta_info", document)
    missing = [key for key in ("spec_verify_ct", "spec_draft_token_num", "spec_accept_token_num") if key not in meta]
    if missing:
        raise ValueError(f"the SGLang meta_info has no {', '.join(missing)} (is speculative decoding on?)")
    return EngineCounts(
        "sglang",
        float(meta["spec_verify_ct"]),
        float(meta["spec_draft_token_num"]),
        float(meta["spec_accept_token_num"]),
    )


def counts_from_llama_cpp(document: dict) -> EngineCounts:
    """llama.cpp server's counters from a response (or its ``timings``): ``draft_n``, ``draft_n_accepted`` and
    ``predicted_n``; the verification rounds are the tokens predicted less the drafts accepted."""
    timings = document.get("timings", document)
    missing = [key for key in ("draft_n", "draft_n_accepted", "predicted_n") if key not in timings]
    if missing:
        raise ValueError(f"the llama.cpp timings have no {', '.join(missing)} (is speculative decoding on?)")
    rounds = float(timings["predicted_n"]) - float(timings["draft_n_accepted"])
    return EngineCounts("llama.cpp", rounds, float(timings["draft_n"]), float(timings["draft_n_accepted"]))


def read_counts(text: str) -> EngineCounts:
    """The counters of a file's text: a Prometheus dump (vLLM) or a JSON response (SGLang or llama.cpp)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not valid JSON: {error}") from None
        if "spec_verify_ct" in document.get("meta_info", document):
            return counts_from_sglang(document)
        if "draft_n" in document.get("timings", document):
            return counts_from_llama_cpp(document)
        raise ValueError("the JSON holds neither SGLang's meta_info (spec_verify_ct) nor llama.cpp's timings (draft_n)")
    return counts_from_vllm(text)


def read_counts_url(url: str, what: str = "--from-metrics") -> EngineCounts:
    """``read_counts`` of what GET ``url`` answers: a live server's ``/metrics`` (vLLM's; ``/metrics`` is added to a
    bare ``http://host:port``); one-line errors naming ``what``."""
    import urllib.request
    from urllib.parse import urlparse

    if urlparse(url).path in ("", "/"):
        url = url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            text = answer.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{what} {url!r} does not answer ({error})") from None
    try:
        return read_counts(text)
    except ValueError as error:
        raise ValueError(f"{what} {url!r}: {error}") from None


def read_counts_file(path: str, what: str = "--from-metrics") -> EngineCounts:
    """``read_counts`` of the text file ``path``, or of a live server where ``path`` is an http(s) URL
    (``read_counts_url``); one-line errors naming ``what`` (the argument that gave it)."""

    if is_url(path):
        return read_counts_url(path, what)
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{what} {path!r} does not exist")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path!r} is not text (a Prometheus dump or a JSON response)") from None
    try:
        return read_counts(text)
    except ValueError as error:
        raise ValueError(f"{what} {path!r}: {error}") from None
