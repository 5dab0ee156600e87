"""Spec-Bench (Xia et al. 2024) on our decoders and the engines (docs/measuring.md, "Spec-Bench"): its questions
(``questions``, with ``data/`` and its Apache-2.0 license), every draft per category in one timing (``suite``), the
table forecast from other questions (``forecast``), the table's rows (``table``) and the recommendation per category
(``recommend``)."""
