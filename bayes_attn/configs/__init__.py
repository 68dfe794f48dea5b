"""The figure configs (``figures.py``, one function per figure) and the protocol configs (TOML)
that ship with the package; ``bayes-attn figures`` reads ``figures.py`` from here by default."""
