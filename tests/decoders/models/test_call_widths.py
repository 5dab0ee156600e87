"""Padded call widths (decoders/models/call_widths.py): the plan from measured call times, and the adapter's padded
calls against unpadded ones (same logits, same cache, same decoded tokens)."""

import pytest
import torch
from tiny_hf import tiny_hf_model

from decoders.models.call_widths import cheapest_widths, pad_cheapest_widths
from decoders.randomness import seeded
from decoders.sampling import Sampling
from decoders.speculative import SpeculativeConfig, generate_speculative

#: Milliseconds of one SmolLM2 call on m new tokens after 128, AMD EPYC, 2 threads (measure_call_seconds).
SMOLLM2_EPYC_MS = {1: 54.0, 2: 85.3, 3: 104.5, 4: 77.1, 5: 70.1, 6: 78.0, 7: 95.8, 8: 74.7}


def test_cheapest_widths_against_measured_smollm2_calls():
    assert cheapest_widths(SMOLLM2_EPYC_MS) == {2: 5, 3: 4, 7: 8}  # 4 is within 10% of 2's 85 ms: not taken
    assert cheapest_widths({m: 50.0 + 10 * m for m in range(1, 9)}) == {}  # costs that grow: nothing padded
    assert cheapest_widths({1: 10.0, 2: 9.5}) == {}  # 5% cheaper is within timing noise


def _widths_seen(adapter) -> list:
    widths = []
    adapter.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    return widths


def test_padded_calls_against_unpadded_calls():
    """A call on 3 tokens padded to 5 (and a ragged batch of 2 rows of 1 token padded to 2 each, only the LM head
    at the last position) gives the unpadded call's logits, keeps the same lengths, and leaves the cache as the
    unpadded call does: the next call's logits agree too. Control: the padding kept in the row moves them."""
    adapter = tiny_hf_model("llama")
    widths = _widths_seen(adapter)
    prompt = torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]])
    states = [adapter.new_state(2) for _ in range(3)]
    for state in states:
        adapter.append(prompt, state, counts=torch.tensor([6, 4]))
    step, after = torch.tensor([[3, 1, 4], [1, 5, 9]]), torch.tensor([[2, 6], [5, 3]])
    adapter.padded_widths = {6: 10}  # 2 rows x 3 tokens -> 2 rows x 5
    padded = adapter.forward(step, states[0])
    adapter.padded_widths = {}
    plain = adapter.forward(step, states[1])
    kept = adapter.forward(torch.cat([step, step[:, -1:].expand(-1, 2)], 1), states[2])[:, :3]
    assert widths[-3:] == [5, 3, 5]
    assert padded.shape == plain.shape == (2, 3, adapter.vocab_size)
    assert torch.allclose(padded, plain, atol=1e-5) and torch.allclose(kept, plain, atol=1e-5)
    assert states[0].lengths.tolist() == states[1].lengths.tolist() == [9, 7]
    for state in states:  # a rejection's cut
        adapter.truncate(state, state.lengths - 1)
    nexts = [adapter.forward(after, state) for state in states]
    assert torch.allclose(nexts[0], nexts[1], atol=1e-5)
    assert not torch.allclose(nexts[2], nexts[1], atol=1e-2)  # the control: padding kept in the rows is seen
    adapter.padded_widths = {2: 4}
    last = adapter.forward(after[:, :1], states[0], counts=torch.tensor([1, 0]), keep=1)
    adapter.padded_widths = {}
    assert (
        widths[-1] == 2
        and torch.allclose(
            last, adapter.forward(after[:, :1], states[1], counts=torch.tensor([1, 0]), keep=1), atol=1e-5
        )
        and states[0].lengths.tolist() == states[1].lengths.tolist()
    )


@pytest.mark.parametrize("sampling", [Sampling(0.0), Sampling(1.0)], ids=["greedy", "sampled"])
def test_padded_target_against_unpadded_speculative_decoding(sampling):
    """Every verify call of gamma 2 (3 tokens) padded to 4: the same tokens, greedy and sampled, and the calls
    are padded (the control: the widths the model saw)."""
    target, draft = tiny_hf_model("llama"), tiny_hf_model("gpt2")
    widths = _widths_seen(target)
    prompts = [[1, 2, 3, 4], [5, 6]]
    runs = []
    for plan in ({}, {6: 8}):
        target.padded_widths = plan
        runs.append(
            generate_speculative(
                target, draft, prompts, max_new_tokens=12, config=SpeculativeConfig(2, sampling), randomness=seeded(3)
            )
        )
        runs[-1] = (runs[-1].tokens, sorted(set(widths[1:])))
        widths.clear()
    assert runs[0][0] == runs[1][0]
    assert 3 in runs[0][1] and 4 not in runs[0][1] and 4 in runs[1][1] and 3 not in runs[1][1]


def test_tiny_models_are_not_padded():
    """A one-token call of a tiny model takes well under 5 ms: nothing to gain, no padding."""
    assert pad_cheapest_widths(tiny_hf_model("llama"), max_tokens=4, context=8, repeats=2) == {}


def test_remeasured_source_against_the_plan_measured_before(monkeypatch):
    """A model loaded again from the same source in this process pads as its first load did, without a call; another
    source, or no source, is measured (the control: the calls counted)."""
    import decoders.models.call_widths as call_widths

    monkeypatch.setattr(call_widths, "_MEASURED", {})
    monkeypatch.setattr(call_widths, "MIN_CALL_SECONDS", 0.0)  # a tiny model's plan is kept, so its reuse shows
    calls = []
    monkeypatch.setattr(
        call_widths, "measure_call_seconds", lambda adapter, **measure: calls.append(1) or {1: 2.0, 2: 1.0}
    )
    first, again, other = (tiny_hf_model("llama") for _ in range(3))
    assert pad_cheapest_widths(first, source="a.gguf@1") == {1: 2} and len(calls) == 1
    assert pad_cheapest_widths(again, source="a.gguf@1") == {1: 2} and again.padded_widths == {1: 2}
    assert len(calls) == 1
    pad_cheapest_widths(other, source="a.gguf@2")
    pad_cheapest_widths(other)
    assert len(calls) == 3


def test_untimed_target_against_a_timed_load(tmp_path, monkeypatch):
    """``load_named`` measures a real target's call widths for a caller that times its calls, and not for one that
    times none (an audit: ``timed=False``), whose calls stay unpadded."""
    import decoders.models.call_widths as call_widths
    from decoders import zoo
    from decoders.models.corpus import character_tokenizer

    tiny_hf_model("llama").model.save_pretrained(tmp_path)
    character_tokenizer().save_pretrained(tmp_path)
    measured = []
    monkeypatch.setattr(call_widths, "pad_cheapest_widths", lambda model, **keys: measured.append(keys) or {})
    untimed = zoo.load_named(str(tmp_path), role="target", timed=False)[0]
    assert measured == [] and untimed.padded_widths == {}
    zoo.load_named(str(tmp_path), role="target")
    assert len(measured) == 1 and measured[0]["source"].startswith(str(tmp_path.resolve()))
