"""Learning-rate schedules: functions of the step (an int or an array)
returning the rate as an array, as mlx.optimizers' schedulers."""
import math

import weft as mx


def _as_float(step):
    return (step if isinstance(step, mx.array) else mx.array(step)).astype(mx.float32)


def exponential_decay(init, decay_rate):
    """init * decay_rate ** step."""
    def schedule(step):
        return init * mx.power(mx.array(decay_rate, mx.float32), _as_float(step))
    return schedule


def step_decay(init, decay_rate, step_size):
    """init * decay_rate ** (step // step_size)."""
    def schedule(step):
        return init * mx.power(mx.array(decay_rate, mx.float32),
                               mx.floor(_as_float(step) / step_size))
    return schedule


def cosine_decay(init, decay_steps, end=0.0):
    """Half a cosine from init down to end over decay_steps, then end."""
    def schedule(step):
        s = mx.minimum(_as_float(step), decay_steps)
        decay = 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * s))
        return end + decay * (init - end)
    return schedule


def linear_schedule(init, end, steps):
    """From init to end in `steps` equal steps, then end (a linear warmup)."""
    if steps < 1:
        raise ValueError(f"steps must be greater than 0, but got {steps}.")

    def schedule(step):
        s = mx.minimum(_as_float(step), steps)
        return s * ((end - init) / steps) + init
    return schedule


def join_schedules(schedules, boundaries):
    """schedules[i + 1] from step boundaries[i] on (counting its steps from
    the boundary); schedules[0] before the first boundary."""
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"Received {len(boundaries)} boundaries but expected "
                         f"{len(schedules) - 1}.")

    def schedule(step):
        s = _as_float(step)
        output = mx.array(schedules[0](s))
        for boundary, later in zip(boundaries, schedules[1:]):
            output = mx.where(s < boundary, output, later(s - boundary))
        return output
    return schedule
