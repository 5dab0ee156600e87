"""The ground floor every package stands on (docs/project.md, "Layout"): ``validation`` (argument checks that name
the argument and value), ``outputs`` (the one atomic writer of every file, strict JSON with provenance), ``timing``
(interleaved benchmark timing and the host's description), ``registry`` (the one mechanism behind the registries of
engines, drafts and audit tests) and ``lazy`` (a package's public face, loaded on first use). Numpy and the standard
library only."""
