"""Spec-Bench (Xia et al. 2024) on our decoders and the engines (docs/measuring.md, "Spec-Bench"): its questions
(``questions``, with ``data/`` and its Apache-2.0 license), one run made from the flags and the models it loads
(``run``), every draft per category in one timing (``suite``), the table forecast from other questions
(``forecast``), the table's rows (``table``), the recommendation per category (``recommend``) and the documents
typed, without torch (``document``)."""
