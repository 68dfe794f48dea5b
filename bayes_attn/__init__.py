"""bayes-attn: the Bayesian theory of how attention learns to copy.

"The paper" (``Paper Sec. ...`` in the docstrings) is I. Lavie, K. Fischer, A. Lekov, F. Van Maele,
Z. Ringel and M. Helias, "Phase Transitions in Attention: A Bayesian Theory of Copy Head Emergence",
arXiv:2606.12058. Our derivation of every formula is docs/theory.md; its checks, docs/validation.md.

Importing the package turns on float64 in JAX: the theory and its saddle points need it.
Training code casts to float32 explicitly where it wants speed.
"""

import jax

jax.config.update("jax_enable_x64", True)

from bayes_attn import algebra  # noqa: E402
from bayes_attn.task import CopyTask, Hyper  # noqa: E402

__version__ = "0.1.0"

__all__ = ["CopyTask", "Hyper", "algebra", "__version__"]
