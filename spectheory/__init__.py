"""spectheory: the closed-form theory of speculative decoding (Leviathan et al. 2023 and extensions).

Modules: ``acceptance`` (D_LK, beta, alpha, lenience), ``speedup`` (Eq. 1, Theorems 3.8 and 3.11,
optimal gamma), ``positional`` (position-dependent and Markov acceptance), ``blockwise`` (Stern et
al. 2018), ``block_verification`` (Sun et al. 2024), ``symbolic`` (sympy twins), ``cli``.
Numpy, scipy and sympy only: this package never imports torch.
"""

__version__ = "0.1.0"
