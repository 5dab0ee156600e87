"""The typed documents against every committed file that holds one, wherever they sit in a file (a report's part, a
figure's list, the bench command's document, read whole as a ``BenchDocument``): a gamma sweep (``BenchReport``), tree
against chain (``TreeBench``), the draft-length policies (``PolicyBench``), a draft of another tokenizer
(``CrossVocabularyBench``), a measured cost profile (``ProfileDocument``), alpha and alpha under lenience, blockwise
decoding and the real-model table (``decoders.bench.documents``); Spec-Bench's table, an engine's rows of it and the
report's answer on it (``decoders.bench.spec_bench.document``); the device check (``decoders.bench.device_document``);
an engine's bench, two servers' and an engine's audits (``decoders.engine_results``); an engine under load
(``decoders.load_results``); the simulators'
(``sims.documents``). Each reads back and, through the JSON edge, gives every value it held again (a key a vintage
lacked is written with its default; a null is the same as an absent key). Controls: a lost value is named, and a
document with a key the type does not know is refused."""

import json
from pathlib import Path

import pytest

from decoders.bench.device_document import DeviceCheckDocument
from decoders.bench.documents import (
    AlphaDocument,
    BenchDocument,
    BenchReport,
    BlockwiseDocument,
    CrossVocabularyBench,
    LenienceDocument,
    PolicyBench,
    ProfileDocument,
    RealModelDocument,
    TreeBench,
)
from decoders.bench.spec_bench.document import EngineTable, SpecBenchAnswer, SpecBenchTable
from decoders.engine_results import EngineBenchDocument, EngineGreedyAudit, EngineTwoSampleAudit, ServerBench
from decoders.load_results import KIND as LOAD_KIND
from decoders.load_results import LoadBenchDocument
from sims.documents import PolicyGains, SimulationDocument, TreesDocument
from spectheory.costs import PROFILE_KIND

ROOT = Path(__file__).resolve().parents[3]


def _kind(part: dict):
    if part.get("kind") == LOAD_KIND:
        return LoadBenchDocument
    if {"budgets", "verifiers"} <= set(part):
        return TreesDocument
    if {"peaks", "alphas", "cs", "comparisons"} <= set(part):
        return PolicyGains
    if {"seed", "runs"} <= set(part) and all("z_score" in run for run in part["runs"]):
        return SimulationDocument
    if part.get("test") == "two-sample" and "a" in part:  # not a verdict recomputed inside one
        return EngineTwoSampleAudit
    if "explained_by_numerics" in part:
        return EngineGreedyAudit
    if {"engine", "plain", "costs", "rows"} <= set(part):
        return EngineBenchDocument
    if {"engine", "against", "seconds_per_token"} <= set(part):
        return ServerBench
    if part.get("kind") == "spectheory device check":
        return DeviceCheckDocument
    if {"corpus_fingerprint", "alpha_text", "cells"} <= set(part):
        return RealModelDocument
    if {"heads", "autoregressive_seconds", "rows"} <= set(part):
        return BlockwiseDocument
    if {"corpus_fingerprint", "estimates"} <= set(part):
        return AlphaDocument
    if {"corpus_fingerprint", "windows", "rows"} <= set(part):
        return LenienceDocument
    if {"task", "drafts", "settings", "categories"} <= set(part):
        return SpecBenchTable
    if {"engine", "prompt_room", "categories", "table"} <= set(part):
        return EngineTable
    if {"categories", "one_setting"} <= set(part):
        return SpecBenchAnswer
    if part.get("kind") == PROFILE_KIND:
        return ProfileDocument
    if "vocabularies" in part and "rows" in part:
        return CrossVocabularyBench
    if "tree_calls" in part and "rows" in part:
        return TreeBench
    blocks = part.get("temperatures")
    if isinstance(blocks, list) and blocks and isinstance(blocks[0], dict) and "best_fixed" in blocks[0]:
        return PolicyBench
    if {"environment", "target", "draft", "rows", "c", "alpha", "autoregressive_seconds"} <= set(part):
        return BenchReport
    return None


def _documents(value, where: str):
    if isinstance(value, dict):
        if _kind(value):
            yield where, value
        for key, inner in value.items():
            yield from _documents(inner, f"{where}/{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _documents(inner, f"{where}[{index}]")


FOUND = [
    found
    for path in sorted((ROOT / "results").rglob("*.json"))
    for found in _documents(json.loads(path.read_text()), str(path.relative_to(ROOT / "results")))
]
#: The writer's keys beside every document (plumbing.outputs.write_json).
BESIDE = {"provenance", "command"}


def _lost(saved, again, where: str = "") -> list:
    """Where ``again`` does not hold a value ``saved`` holds (a null counts as absent; keys only ``again`` holds are
    defaults)."""
    if isinstance(saved, dict) and isinstance(again, dict):
        return [lost for key, value in saved.items() for lost in _lost(value, again.get(key), f"{where}/{key}")]
    if isinstance(saved, list) and isinstance(again, list) and len(saved) == len(again):
        return [lost for i, (a, b) in enumerate(zip(saved, again)) for lost in _lost(a, b, f"{where}[{i}]")]
    return [] if saved is None or saved == again else [where]


def test_documents_found():
    """Every kind is found, at least as many as were committed when the types were written (a new file adds to them)."""
    kinds = [_kind(part).__name__ for _, part in FOUND]
    committed = {
        "BenchReport": 32,
        "TreeBench": 9,
        "PolicyBench": 3,
        "CrossVocabularyBench": 4,
        "ProfileDocument": 11,
        "SpecBenchTable": 3,
        "EngineTable": 4,
        "SpecBenchAnswer": 1,
        "AlphaDocument": 2,
        "LenienceDocument": 1,
        "BlockwiseDocument": 1,
        "RealModelDocument": 1,
        "DeviceCheckDocument": 5,
        "EngineBenchDocument": 52,
        "ServerBench": 1,
        "EngineTwoSampleAudit": 74,
        "EngineGreedyAudit": 4,
        "TreesDocument": 1,
        "PolicyGains": 1,
        "SimulationDocument": 1,
        "LoadBenchDocument": 4,
    }
    assert all(kinds.count(kind) >= count for kind, count in committed.items()), kinds


@pytest.mark.parametrize("where, part", FOUND, ids=[where for where, _ in FOUND])
def test_committed_document_against_its_type(where, part):
    kind = _kind(part)
    saved = {key: value for key, value in part.items() if key not in BESIDE}
    if kind is BenchReport and "/" not in where and "[" not in where:  # a file of its own: the bench command's
        kind = BenchDocument  # the sweep's keys and its own beside them (text, prompts, forecast, batches, hf)
    elif kind is BenchReport:  # a part of another document
        saved = {key: value for key, value in saved.items() if key in BenchReport.__dataclass_fields__ or key == "best"}
    again = json.loads(json.dumps(kind.from_dict(saved).as_dict()))
    assert _lost(saved, again) == []


def test_unknown_key_is_refused():
    where, part = next(found for found in FOUND if _kind(found[1]) is TreeBench)
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        TreeBench.from_dict(dict(part, odd=1))


def test_lost_names_a_changed_value_not_a_default():
    saved = {"a": {"b": 1, "c": None}, "rows": [{"x": 1}]}
    assert _lost(saved, {"a": {"b": 1, "d": 2}, "rows": [{"x": 1, "y": None}]}) == []
    assert _lost(saved, {"a": {"b": 2}, "rows": [{"x": 0}]}) == ["/a/b", "/rows[0]/x"]
