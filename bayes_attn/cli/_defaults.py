"""The one place where the command line reads the defaults of its options.

No option of the command line holds a default of a sampler, of the trainer or of an experiment: it
holds a :class:`Default`, which names the value's home and reads it when it is first needed (for
``--help``, or when the option is left out), so that building the command line imports nothing
heavy. The homes are the algorithms' settings dataclasses
(:class:`~bayes_attn.inference.adam.AdamSettings`, :class:`~bayes_attn.inference.smc.SMCSettings`,
:class:`~bayes_attn.inference.nuts.NUTSSettings`, :class:`~bayes_attn.inference.sgld.SGLDSettings`,
:class:`~bayes_attn.inference.llc.LLCSettings`) and, for what is an experiment's choice rather
than an algorithm's (a width, a number of members, the LLC's level and burn-in), the sweep's
``DEFAULTS`` (:mod:`bayes_attn.experiments.sweep`), which read the same dataclasses; ``train``
trains as the paper's protocol does (:mod:`bayes_attn.experiments.protocol`: its width and its
Adam).
:class:`~bayes_attn.inference.umbrella.UmbrellaSettings` is read per level by the landscape itself
(``bayes-attn landscape`` passes only the options given).
"""

from __future__ import annotations

import dataclasses
import importlib


class Default:
    """A default read from its home when first needed; ``--help`` shows the value.

    ``Default(module, name, key, ...)`` is ``module.name[key]...``: a settings dataclass's field
    (from an instance made with its defaults), or a dict's entry by key.
    """

    def __init__(self, module: str, *path: str):
        self.module, self.path = module, path

    def __call__(self):
        obj = importlib.import_module(self.module)
        for name in self.path:
            if isinstance(obj, dict):
                obj = obj[name]
            elif dataclasses.is_dataclass(obj) and isinstance(obj, type):
                obj = getattr(obj(), name)
            else:
                obj = getattr(obj, name)
        return obj

    def __str__(self):
        return str(self())


# ---- the homes ----------------------------------------------------------------------------------


def _settings(module: str, cls: str, name: str) -> Default:
    return Default(f"bayes_attn.inference.{module}", cls, name)


def adam(name: str) -> Default:
    """A field of :class:`~bayes_attn.inference.adam.AdamSettings`."""
    return _settings("adam", "AdamSettings", name)


def smc(name: str) -> Default:
    """A field of :class:`~bayes_attn.inference.smc.SMCSettings`."""
    return _settings("smc", "SMCSettings", name)


def nuts(name: str) -> Default:
    """A field of :class:`~bayes_attn.inference.nuts.NUTSSettings`."""
    return _settings("nuts", "NUTSSettings", name)


def sgld(name: str) -> Default:
    """A field of :class:`~bayes_attn.inference.sgld.SGLDSettings`."""
    return _settings("sgld", "SGLDSettings", name)


def llc(name: str) -> Default:
    """A field of :class:`~bayes_attn.inference.llc.LLCSettings` that the ``llc`` point takes as
    it is; the point's own choices (level, width, burn-in) are :func:`sweep` ``("llc", ...)``."""
    return _settings("llc", "LLCSettings", name)


def llc_command(name: str) -> Default:
    """A field of :data:`~bayes_attn.inference.llc.COMMAND_SETTINGS`: ``bayes-attn llc``'s own
    sampler defaults (NUTS in the Laplace metric, where :func:`~bayes_attn.inference.llc.run_llc`
    defaults to SGLD; the reason is in its docstring)."""
    return Default("bayes_attn.inference.llc", "COMMAND_SETTINGS", name)


def protocol(name: str) -> Default:
    """A field of :class:`~bayes_attn.experiments.protocol.ProtocolConfig`, the paper's protocol
    (its width): with :func:`protocol_adam`, ``bayes-attn train``'s defaults, which reach the
    theory's loss on the paper's preset where those of
    :class:`~bayes_attn.inference.adam.AdamSettings` and of the adam sweep (trained embeddings,
    width 64) do not."""
    return Default("bayes_attn.experiments.protocol", "ProtocolConfig", name)


def protocol_adam(name: str) -> Default:
    """A field of :data:`~bayes_attn.experiments.protocol.PROTOCOL_ADAM`, the protocol's Adam."""
    return Default("bayes_attn.experiments.protocol", "PROTOCOL_ADAM", name)


def sweep(kind: str, name: str) -> Default:
    """The default of ``name`` in a ``kind`` sweep: an experiment's own choice (a width, the
    number of members, the LLC's level and burn-in), in the sweep's ``DEFAULTS``."""
    return Default("bayes_attn.experiments.sweep", "DEFAULTS", kind, name)


# ---- the homes of the choices (read by cli._types.LazyChoice) ---------------------------------


def names(module: str, name: str):
    """A function that reads the names ``module.name`` when first needed."""
    return lambda: tuple(Default(module, name)())


#: the kinds a sweep runs, the LLC's samplers and NUTS metrics, the landscape's levels
SWEEP_KINDS = names("bayes_attn.experiments.sweep", "KINDS")
LLC_SAMPLERS = names("bayes_attn.inference.llc", "LLC_SAMPLERS")
LLC_METRICS = names("bayes_attn.inference.llc_nuts", "NUTS_METRICS")
LANDSCAPE_LEVELS = names("bayes_attn.experiments.landscape", "LANDSCAPE_LEVELS")
