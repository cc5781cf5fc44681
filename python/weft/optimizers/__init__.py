"""weft.optimizers: mlx.optimizers' optimizers, schedules and clip_grad_norm
(import weft.optimizers as optim)."""
from . import schedulers  # noqa: F401
from .optimizers import (  # noqa: F401
    SGD, AdaDelta, Adafactor, Adagrad, Adam, Adamax, AdamW, Lion, Muon, MultiOptimizer, Optimizer,
    RMSprop, clip_grad_norm,
)
from .schedulers import (  # noqa: F401
    cosine_decay, exponential_decay, join_schedules, linear_schedule, step_decay,
)
