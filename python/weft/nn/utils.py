"""value_and_grad and checkpoint over a Module's trainable parameters, and
average_gradients and clip_grad_norm_sharded (training over
weft.distributed)."""
import functools

import weft as mx
from weft.distributed import average_gradients  # noqa: F401  (MLX's nn.utils name)

from ..utils import tree_map, tree_reduce


def value_and_grad(model, fn):
    """A function returning (fn(*args), gradients of fn's first output with
    respect to model.trainable_parameters()), as a tree like those."""
    def with_parameters(parameters, *args, **kwargs):
        model.update(parameters)
        return fn(*args, **kwargs)

    value_and_grad_fn = mx.value_and_grad(with_parameters)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        parameters = model.trainable_parameters()
        try:
            return value_and_grad_fn(parameters, *args, **kwargs)
        finally:
            # the traced stand-ins must not stay in the model
            model.update(parameters)

    return wrapped


def checkpoint(module, fn=None):
    """fn (default: module.__call__) recomputed in the backward pass instead of
    keeping its intermediate values."""
    fn = fn or module.__call__

    def with_parameters(parameters, *args, **kwargs):
        module.update(parameters)
        return fn(*args, **kwargs)

    checkpointed = mx.checkpoint(with_parameters)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return checkpointed(module.trainable_parameters(), *args, **kwargs)

    return wrapped


def clip_grad_norm_sharded(gradients, max_norm, group=None):
    """clip_grad_norm for gradients split over a group (each process holds
    a share, as a sharded model's): the global norm is the square root of
    the group's summed squared norms; every share is scaled by
    min(max_norm / (norm + 1e-6), 1). Returns (the scaled share, the norm)."""
    if max_norm < 0:
        raise ValueError(f"max_norm must be non-negative, got {max_norm}")
    local = tree_reduce(lambda acc, g: acc + mx.sum(mx.square(g)), gradients, mx.array(0.0))
    norm = mx.sqrt(mx.distributed.all_sum(local, group=group))
    factor = mx.minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * factor, gradients), norm
