"""weft.distributed: collectives across processes (mlx.core.distributed's API).

Launch with ``mpirun -np N python script.py``; a process not launched by an MPI
launcher is a group of one. Collectives are lazy ops: they run when evaluated,
on the group's own communication stream (the ``stream`` argument is accepted
for compatibility and not used). Every rank must evaluate the collectives of a
group in the same order; a mismatch raises RuntimeError on every rank.
"""
from . import _core

_KINDS = {"all_sum": 0, "all_max": 1, "all_min": 2, "all_gather": 3, "sum_scatter": 4}


class Group:
    """A set of processes that run collectives together."""

    def __init__(self, handle):
        self._handle = handle
        self._rank, self._size = _core._distributed_rank_size(handle)

    def rank(self):
        """This process's rank in the group."""
        return self._rank

    def size(self):
        """The number of processes in the group."""
        return self._size

    def split(self, color, key=-1):
        """The group of the ranks passing the same ``color``, ordered by ``key``
        (-1: this group's order). Every rank of the group must call it."""
        return Group(_core._distributed_split(self._handle, int(color), int(key)))

    def __repr__(self):
        return f"Group(rank={self._rank}, size={self._size})"


def _handle(group):
    if group is None:
        return None
    if not isinstance(group, Group):
        raise TypeError(f"group must be a weft.distributed.Group or None, not {type(group).__name__}")
    return group._handle


def is_available():
    """Whether a distributed backend (Open MPI's libmpi.so.40) can be loaded."""
    return _core._distributed_is_available()


def init(strict=False, backend="any"):
    """The world group. Under mpirun it starts MPI; otherwise (or if MPI cannot
    be loaded) a group of one process, unless ``strict``: then RuntimeError."""
    if backend not in ("any", "mpi"):
        raise ValueError(f"unknown distributed backend {backend!r} (weft has 'mpi')")
    return Group(_core._distributed_init(bool(strict)))


def _collective(name, x, group):
    return _core._distributed_collective(_KINDS[name], x, _handle(group))


def all_sum(x, *, group=None, stream=None):
    """The element-wise sum of x over the group, in rank order (the same bits
    on every rank)."""
    return _collective("all_sum", x, group)


def all_max(x, *, group=None, stream=None):
    """The element-wise maximum of x over the group."""
    return _collective("all_max", x, group)


def all_min(x, *, group=None, stream=None):
    """The element-wise minimum of x over the group."""
    return _collective("all_min", x, group)


def all_gather(x, *, group=None, stream=None):
    """Every rank's x concatenated along axis 0, in rank order."""
    return _collective("all_gather", x, group)


def sum_scatter(x, *, group=None, stream=None):
    """The sum over the group of x, split along axis 0: this rank's part."""
    return _collective("sum_scatter", x, group)


def send(x, dst, *, group=None, stream=None):
    """Sends x to rank ``dst`` when the result (x's value) is evaluated."""
    return _core._distributed_send(x, int(dst), _handle(group))


def recv(shape, dtype, src, *, group=None, stream=None):
    """Receives an array of ``shape`` and ``dtype`` from rank ``src``."""
    return _core._distributed_recv(tuple(shape), dtype, int(src), _handle(group))


def recv_like(x, src, *, group=None, stream=None):
    """recv with x's shape and dtype."""
    return _core._distributed_recv_like(x, int(src), _handle(group))


def _leaves(tree, out):
    if isinstance(tree, dict):
        for v in tree.values():
            _leaves(v, out)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            _leaves(v, out)
    elif tree is not None:
        out.append(tree)
    return out


def _rebuild(tree, values):
    if isinstance(tree, dict):
        return {k: _rebuild(v, values) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rebuild(v, values) for v in tree)
    return None if tree is None else next(values)


def average_gradients(gradients, group=None, all_reduce_size=32 * 1024 ** 2,
                      communication_type=None, communication_stream=None):
    """The mean over the group of a tree of gradients (dicts, lists, tuples of
    arrays), as ``weft.nn.utils.average_gradients``. Arrays are flattened and
    concatenated into buckets of about ``all_reduce_size`` bytes (0: one
    collective per array), each summed by one all_sum. ``communication_type``
    (a dtype) casts the buckets for the exchange; ``communication_stream`` is
    accepted and unused (collectives run on the group's own stream)."""
    from . import concatenate, reshape, split  # the package is loaded by now

    size = group.size() if group is not None else init().size()
    if size == 1:
        return gradients
    leaves = _leaves(gradients, [])
    averaged = [None] * len(leaves)
    bucket, bucket_bytes = [], 0

    def flush():
        nonlocal bucket, bucket_bytes
        if not bucket:
            return
        flat = [reshape(leaves[i], (-1,)) for i in bucket]
        joined = concatenate(flat) if len(flat) > 1 else flat[0]
        dtype = joined.dtype
        if communication_type is not None:
            joined = joined.astype(communication_type)
        summed = (all_sum(joined, group=group) / size).astype(dtype)
        sizes = [leaves[i].size for i in bucket]
        bounds = [sum(sizes[:k + 1]) for k in range(len(sizes) - 1)]
        parts = split(summed, bounds) if bounds else [summed]
        for i, part in zip(bucket, parts):
            averaged[i] = reshape(part, leaves[i].shape)
        bucket, bucket_bytes = [], 0

    for i, leaf in enumerate(leaves):
        if bucket and (leaf.dtype != leaves[bucket[0]].dtype or all_reduce_size <= 0):
            flush()
        bucket.append(i)
        bucket_bytes += leaf.nbytes
        if bucket_bytes >= all_reduce_size:
            flush()
    flush()
    return _rebuild(gradients, iter(averaged))
