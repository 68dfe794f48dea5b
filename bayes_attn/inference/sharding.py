"""Sharding an ensemble's member axis over the local devices.

Members are independent: each trains (or samples) on its own dataset. On one device they run one
after another under ``lax.map`` (a ``vmap`` over members was ~3x slower on the CPU, see
docs/performance.md). With several local devices the member axis is split over a one-axis
:class:`~jax.sharding.Mesh` named ``"member"`` and each device runs its block of members with the
same ``lax.map`` inside :func:`jax.shard_map`. The member axis is padded to a multiple of the device
count by repeating the last member, and the padding is dropped afterwards.

The library never jits: :func:`sharded_map` is meant to be called inside the caller's ``jax.jit``.

References
----------
docs/performance.md, "Scaling out".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MEMBER_AXIS = "member"


def member_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis mesh named ``"member"`` over ``devices`` (default: ``jax.local_devices()``)."""
    devices = jax.local_devices() if devices is None else list(devices)
    if len(devices) == 0:
        raise ValueError("devices must name at least one device, got an empty sequence")
    return Mesh(np.asarray(devices, dtype=object), (MEMBER_AXIS,))


def leading_size(tree) -> int:
    """The common length of the leading axis of every leaf; raises if they differ or a leaf is a
    scalar."""
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in jax.tree.leaves(tree)}
    if None in sizes:
        raise ValueError("every leaf must have a leading (member) axis; got a scalar leaf")
    if len(sizes) != 1:
        raise ValueError(f"leaves must share the length of their leading axis, got {sorted(sizes)}")
    return sizes.pop()


def pad_leading(tree, multiple: int):
    """Pad every leaf's leading axis to a multiple of ``multiple`` by repeating its last entry.

    Returns ``(padded, n)``, ``n`` the original length (see :func:`unpad_leading`). Repeating a real
    entry (rather than zeros) keeps the padded members' computation finite; works for key arrays.
    """
    if isinstance(multiple, bool) or not isinstance(multiple, int | np.integer) or multiple < 1:
        raise ValueError(f"multiple must be an integer >= 1, got {multiple!r}")
    n = leading_size(tree)
    extra = -n % multiple
    if extra == 0:
        return tree, n
    return jax.tree.map(lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], extra, 0)]), tree), n


def unpad_leading(tree, n: int):
    """The first ``n`` entries of every leaf's leading axis (undoes :func:`pad_leading`)."""
    return jax.tree.map(lambda x: x[:n], tree)


def member_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the mesh's ``"member"`` axis, other axes whole."""
    return NamedSharding(mesh, PartitionSpec(MEMBER_AXIS))


def shard_leading(tree, mesh: Mesh):
    """Place every leaf with its leading axis split over the mesh (a no-op on one device). The
    leading axis must be a multiple of the device count (:func:`pad_leading`)."""
    if mesh.size == 1:
        return tree
    n = leading_size(tree)
    if n % mesh.size:
        raise ValueError(
            f"the leading axis ({n}) must be a multiple of the device count ({mesh.size}); "
            "pad it with pad_leading"
        )
    return jax.device_put(tree, member_sharding(mesh))


def sharded_map(f: Callable, xs, *args, mesh: Mesh | None = None):
    """``lax.map(lambda x: f(x, *args), xs)`` with the leading axis of ``xs`` split over ``mesh``.

    Parameters
    ----------
    f : callable
        ``f(x, *args)`` for one entry ``x`` of ``xs`` (a pytree sliced along its leading axis).
    xs : pytree
        Every leaf has the same leading (member) axis.
    *args : pytrees
        Passed whole to every call of ``f`` (replicated over the devices).
    mesh : Mesh, optional
        Default :func:`member_mesh` over the local devices. On a one-device mesh this is plain
        ``lax.map`` (the single-device code path). Otherwise each device runs ``lax.map`` over its
        block of the leading axis inside :func:`jax.shard_map`; the axis is padded to a multiple of
        the device count and the padding dropped from the outputs.

    Returns
    -------
    pytree
        ``f``'s outputs stacked along a new leading axis, as ``lax.map`` gives them.
    """
    mesh = member_mesh() if mesh is None else mesh
    if mesh.size == 1:
        return jax.lax.map(lambda x: f(x, *args), xs)
    xs, n = pad_leading(xs, mesh.size)

    def block(xs, *args):
        return jax.lax.map(lambda x: f(x, *args), xs)

    spec = PartitionSpec(MEMBER_AXIS)
    in_specs = (spec, *(PartitionSpec() for _ in args))
    # check_vma=False: nothing here communicates across devices, and the check rejects loops
    # whose carry starts device-invariant and becomes device-varying (NumPyro's while_loops)
    out = jax.shard_map(block, mesh=mesh, in_specs=in_specs, out_specs=spec, check_vma=False)(
        xs, *args
    )
    return unpad_leading(out, n) if n != leading_size(xs) else out
