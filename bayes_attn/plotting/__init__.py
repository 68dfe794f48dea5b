"""Plots (data in, matplotlib Figure out) and the figure builders that ``bayes-attn figures``
runs from the figure configs."""

from bayes_attn.plotting import plots

__all__ = ["plots"]
