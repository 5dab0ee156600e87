"""Measurement on real pairs: the stdlib corpus (``corpus``), training (``training``), the shipped models
(``zoo``, weights in ``weights/``), acceptance rate alpha (``alpha``), speed (``bench``, ``hf_compare``) and the
one-command report's measurement (``report``). Everything here runs the decoders; nothing here draws."""
