"""The configs that ship with the package: the figure configs (``figures.py``, one function per
figure; ``bayes-attn figures`` reads it from here by default), the protocol configs (TOML
``[protocol]`` tables; ``protocol_quick.toml`` is the quick preset) and an example sweep
(``sweep_example.toml``, a ``[sweep]`` table for ``bayes-attn sweep --config``)."""
