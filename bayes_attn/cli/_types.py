"""The command line's parameter types: numbers, step sizes, output paths (checked when the line is
parsed, before any work starts) and the options that ``--config`` may stand in for."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

import click

from bayes_attn._validation import writable


class Floats(click.ParamType):
    """A comma-separated list of numbers: ``--P 100,200,400``."""

    name = "numbers"

    def __init__(self, cast=float):
        self.cast = cast

    def convert(self, value, param, ctx):
        if isinstance(value, list | tuple):
            return tuple(value)
        try:
            return tuple(self.cast(v) for v in str(value).split(",") if v.strip())
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of numbers", param, ctx)


FLOATS, INTS = Floats(float), Floats(int)


class _OrAuto(click.ParamType):
    """A value, or ``auto`` (the sampler's rule): ``parse`` reads the value (``what`` says what
    it must be), ``problem`` says what is wrong with it, if anything."""

    what = "a value"

    def parse(self, value):
        raise NotImplementedError

    def problem(self, x, value) -> str | None:
        return None

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            x = self.parse(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither {self.what} nor 'auto'", param, ctx)
        problem = self.problem(x, value)
        if problem:
            self.fail(problem, param, ctx)
        return x


class StepSize(_OrAuto):
    """A positive step size, or ``auto`` (the sampler's rule)."""

    name, what = "step|auto", "a number"

    def parse(self, value):
        return float(value)

    def problem(self, x, value):
        if not (math.isfinite(x) and x > 0):
            return f"step_size must be a positive finite number or 'auto', got {value!r}"
        return None


STEP = StepSize()


class Steps(_OrAuto):
    """A number of steps >= 0, or ``auto`` (the sampler's rule)."""

    name, what = "n|auto", "a whole number"

    def parse(self, value):
        return int(str(value))

    def problem(self, n, value):
        return None if n >= 0 else f"must be >= 0 or 'auto', got {n}"


BURNIN = Steps()


def package_result(path: Path) -> bool:
    """Whether ``path`` is a NetCDF (HDF5) file that this package wrote: one of its groups
    carries ``bayes_attn_version`` (every result's record, :mod:`bayes_attn.inference.record`,
    and every sweep file)."""
    with open(path, "rb") as fh:
        if fh.read(8) != b"\x89HDF\r\n\x1a\n":
            return False
    import h5py

    try:
        with h5py.File(path, "r") as f:
            if "bayes_attn_version" in f.attrs:
                return True
            return bool(f.visititems(lambda _, obj: "bayes_attn_version" in obj.attrs or None))
    except OSError:
        return False


class OutPath(click.Path):
    """An output path, checked when the command line is parsed, before any work starts.

    A file (``folder=False``): its parent must be an existing, writable folder, and the path, if it
    exists, a writable NetCDF file that this package wrote (a text file, or another program's
    data, is refused, not overwritten). A folder (``folder=True``): it may not exist yet, but then its parent
    must be an existing, writable folder; if it exists it must be a writable folder. Writable means
    by ``os.access`` and by the mode bits (a read-only file is refused, root or not).
    """

    def __init__(self, folder: bool = False):
        super().__init__(file_okay=not folder, dir_okay=folder)
        self.folder = folder

    def convert(self, value, param, ctx):
        path = Path(os.fsdecode(value))
        what = "folder" if self.folder else "file"
        if path.exists():
            if path.is_dir() != self.folder:
                kind = "file" if self.folder else "folder"
                self.fail(f"{str(path)!r} is a {kind}, not a {what}", param, ctx)
            if not writable(path, self.folder):
                mode = stat.filemode(path.stat().st_mode)
                self.fail(f"{what} {str(path)!r} is not writable ({mode})", param, ctx)
            if not self.folder and not package_result(path):
                self.fail(
                    f"{str(path)!r} exists and is not a NetCDF result of bayes-attn; refusing to "
                    "overwrite it (remove it, or name another file)", param, ctx,
                )  # fmt: skip
            return os.fsdecode(value)
        parent = path.parent
        if not parent.exists():
            self.fail(f"folder {str(parent)!r} does not exist (create it first)", param, ctx)
        if not parent.is_dir():
            self.fail(f"{str(parent)!r} is not a folder", param, ctx)
        if not writable(parent, folder=True):
            self.fail(f"cannot write into the folder {str(parent)!r}", param, ctx)
        return os.fsdecode(value)


class RequiredUnlessConfig(click.Option):
    """Shown as ``[required unless --config sets it]`` in --help; the command checks it."""

    def get_help_extra(self, ctx):
        extra = super().get_help_extra(ctx)
        extra["required"] = "required unless --config sets it"
        return extra


class LazyChoice(click.Choice):
    """A choice among names that live in their home, read when first needed (``names()``): the
    command line stays light, and a name added there is accepted here at once."""

    def __init__(self, names):
        self._names = names
        super().__init__(())

    @property
    def choices(self):
        return tuple(self._names())

    @choices.setter
    def choices(self, value):  # click.Choice.__init__ sets it; the names are read, not kept
        pass
