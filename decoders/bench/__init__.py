"""Measurement, beside the decoders (docs/project.md): acceptance rate alpha (``alpha``), speed (``bench`` with its
typed ``rows`` and ``documents``, ``bench_lines``, ``hf_compare``, ``tree_bench``, ``policy_bench``), profiles
(``profile``), forecasts made before the runs they predict (the room ``forecast``), divergence (``diverge``), task
prompts (``prompts``), Spec-Bench (the room ``spec_bench``), model inputs (``inputs``), export (``export``), the
prepared GPU check (``device_check`` with ``compiled_check`` and its ``device_document``), the one-command report's
measurement (the room ``report``) and the documents behind results/ (``runs``). Everything here runs the decoders and
the models (``decoders.models``); nothing here draws. Serving engines sit beside it, in ``decoders.engines``; the
audit, ours and the engines', in ``decoders.audit``."""
