"""What the drawing scripts share: a study's result file read back
(:mod:`bayes_attn.experiments.results`), pyplot on Agg, a figure saved and the command line's
parser."""

import argparse
from pathlib import Path

from bayes_attn.experiments.results import filtered, open_study, options, setting
from bayes_attn.experiments.results import study_preset as preset

__all__ = ["arguments", "filtered", "open_study", "options", "preset", "pyplot", "save", "setting"]


def pyplot():
    """matplotlib's pyplot on the Agg backend (the scripts write files, never open windows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path, dpi):
    """Write ``fig`` to ``path`` (its folder made) and say so."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    print("wrote", path)


def arguments(doc: str) -> argparse.ArgumentParser:
    """The command line's parser, described by the first line of the script's docstring."""
    return argparse.ArgumentParser(description=doc.splitlines()[0])
