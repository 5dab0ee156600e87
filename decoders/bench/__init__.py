"""Measurement, beside the decoders (docs/project.md): acceptance rate alpha (``alpha``), speed (``bench``,
``bench_lines``, ``hf_compare``, ``tree_bench``, ``policy_bench``), profiles (``profile``), divergence
(``diverge``), the audit command's runs and throughput (``audit``, ``audit_throughput``), task prompts
(``tasks``; Spec-Bench's questions: ``spec_bench``, every draft per category: ``spec_bench_suite``, its table:
``spec_bench_table``, the report's answer per category: ``spec_bench_report``), model inputs (``inputs``),
export (``export``) and the one-command report's measurement (``report``, ``runs``). Everything here runs the
decoders and the models (``decoders.models``); nothing here draws. Serving engines sit beside it, in
``decoders.engines``."""
