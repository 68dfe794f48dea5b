"""Level 1 as a NumPyro model: the d -> infinity posterior over the bilinear form M.

References
----------
Paper Sec. 3.1-3.2 ("closed-form posterior over the attention matrix"); docs/theory.md §2 (Level 1).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayes_attn import algebra
from bayes_attn._validation import check_activation, check_gram, check_tokens
from bayes_attn.models._sites import record_order_parameters
from bayes_attn.theory.action import evidence_exact


def kernel_limit_model(task, hyper, tokens, activation: str, gram=None):
    """Posterior over M ((V+L) x (V+L), prior N(0, g_W / chi)) with the readout integrated out exactly.

    The likelihood is the exact Gaussian evidence of the tokens' targets (Woodbury in V+L dimensions,
    log-determinant included). Logits come from per-(token, position) table gathers
    (:func:`algebra.logits_from_M`). Deterministic sites: ``c1``/``cG`` (linear) or ``a1``/``aG``
    (softmax) projected from the mean attention over the dataset, and ``token_residual``.

    ``gram``: the Gram W^T W / d of frozen embeddings (:func:`bayes_attn.algebra.embedding_gram`).
    The model is then the exact posterior of ``network_model(..., train_embeddings=False)`` with
    those embeddings, at any width, with W_O integrated out and W_G in the whitened coordinates
    M = U^T W_G U (:func:`bayes_attn.algebra.span_basis`); the parts of W_G outside the span feel only
    the prior and leave the order parameters alone (docs/theory.md, "Frozen embeddings at any
    width"). ``gram=None`` is the d -> infinity limit, g = I.
    """
    check_activation(activation)
    tokens = jnp.asarray(check_tokens(tokens, task.L, task.V))
    n = task.n_features
    factor = None if gram is None else algebra.gram_factor(jnp.asarray(check_gram(gram, n)), n)
    scale = jnp.sqrt(hyper.g_w / hyper.chi)
    M = numpyro.sample("M", dist.Normal(0.0, scale).expand((n, n)).to_event(2))
    A = algebra.attention(algebra.logits_from_M(M, tokens, task.V, factor), activation)
    s_data, logdet = evidence_exact(A, tokens, task.V, hyper.sigma2, hyper.g_o, factor)
    numpyro.factor("evidence", -hyper.chi * s_data - logdet)
    record_order_parameters(A, activation)
