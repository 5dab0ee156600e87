"""spectheory: the closed-form theory of speculative decoding (Leviathan et al. 2023 and extensions;
docs/theory.md).

Modules: ``acceptance`` (D_LK, beta, alpha, lenience), ``speedup`` (Eq. 1, Theorems 3.8 and 3.11,
optimal gamma), ``positional`` (position-dependent and Markov acceptance), ``blockwise`` (Stern et
al. 2018), ``block_verification`` (Sun et al. 2024), ``symbolic`` (sympy twins), ``calculator``.
Numpy, scipy, sympy, the standard library and ``plumbing`` (argument checks) only: these modules never import
torch. The ``spectheory`` command is the ``cli`` package, the top floor (docs/project.md).
"""

__version__ = "0.1.0"
