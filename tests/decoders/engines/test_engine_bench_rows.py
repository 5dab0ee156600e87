"""The engine bench's typed rows (decoders.engine_results.EngineBenchRow) against the committed results."""

import pytest


def test_engine_bench_rows_against_every_committed_file():
    """The engine bench's row format (decoders.engine_results.EngineBenchRow) reads every `bench --engine` row
    committed under results/ (llama.cpp, llama-server, vLLM), each vintage's keys with their values. Control: an
    unknown key is refused."""
    from committed_results import committed_rows, misread

    from decoders.engine_results import EngineBenchRow

    rows = committed_rows("rows", frozenset({"mean_proposal_length", "greedy_equal_to_plain"}))
    assert len(rows) >= 100, len(rows)
    assert misread(EngineBenchRow, rows) == []
    with pytest.raises(TypeError, match="unexpected keyword argument 'odd'"):
        EngineBenchRow.from_dict(dict(rows[0], odd=1))
