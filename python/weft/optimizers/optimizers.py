"""Optimizers with mlx.optimizers' API.

An optimizer's state is one tree (a dict): "step", the hyper-parameters that
may change or follow a schedule ("learning_rate", ...), and, under the same
keys as the parameters, one dict of arrays per parameter. Every value in it is
an array, so the whole state can be an mx.compile input and output.
"""
import weft as mx

from ..utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten


class Optimizer:
    """Base class: subclasses define init_single (a parameter's state) and
    apply_single (one parameter's update)."""

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})

    def update(self, model, gradients):
        """Applies the gradients to the model's parameters in place."""
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters):
        """Creates the state of every parameter in the tree `parameters` that
        has none yet (state loaded earlier is kept)."""
        def add_missing(params, state):
            if isinstance(params, (list, tuple)):
                state = list(state)
                for i in range(len(state)):
                    state[i] = add_missing(params[i], state[i])
                state.extend(tree_map(lambda _: {}, params[len(state):]))
                return type(params)(state) if not hasattr(params, "_fields") else type(params)(*state)
            if isinstance(params, dict):
                for k, v in params.items():
                    state[k] = add_missing(v, state[k]) if k in state else tree_map(lambda _: {}, v)
                return state
            return state

        add_missing(parameters, self._state)
        tree_map(lambda p, s: s or self.init_single(p, s), parameters, self._state)
        self._initialized = True

    def init_single(self, parameter, state):
        """Fills `state` (a dict) for one parameter."""
        raise NotImplementedError

    def apply_single(self, gradient, parameter, state):
        """The updated parameter; updates `state` in place."""
        raise NotImplementedError

    def apply_gradients(self, gradients, parameters):
        """The parameters after one step with these gradients (a tree like the
        parameters, or a part of it)."""
        if not self._initialized:
            self.init(gradients)
        for name, schedule in self._schedulers.items():
            self.state[name] = schedule(self.step)
        self.state["step"] = self.step + 1
        return tree_map(self.apply_single, gradients, parameters, self.state)

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, state):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        return self.state["step"]

    @property
    def learning_rate(self):
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name, value):
        """A hyper-parameter kept in the state: a number, or a schedule
        evaluated at the current step."""
        if callable(value):
            self._schedulers[name] = value
            value = value(self.step)
        self.state[name] = mx.array(value)

    def _lr(self, gradient):
        return self.learning_rate.astype(gradient.dtype)


def _check_positive_eps(eps):
    if not eps > 0:
        raise ValueError(f"Epsilon value should be >0, {eps} was provided instead")


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (dampening,
    Nesterov) and L2 weight decay."""

    def __init__(self, learning_rate, momentum=0.0, weight_decay=0.0, dampening=0.0,
                 nesterov=False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        lr = self._lr(gradient)
        if self.momentum <= 0:
            return parameter - lr * gradient
        v = self.momentum * state["v"]
        v = v + ((1 - self.dampening) * gradient if self.dampening > 0 else gradient)
        state["v"] = v
        update = gradient + self.momentum * v if self.nesterov else v
        return parameter - lr * update


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps)."""

    def __init__(self, learning_rate, alpha=0.99, eps=1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        if alpha < 0.0:
            raise ValueError(f"RMSprop alpha should be >=0, {alpha} was provided instead")
        _check_positive_eps(eps)
        self.alpha = alpha
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient) * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    """v += g^2; p -= lr g / (sqrt(v) + eps)."""

    def __init__(self, learning_rate, eps=1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        _check_positive_eps(eps)
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient) * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    """Zeiler's AdaDelta: running averages of g^2 (v) and of the updates (u)."""

    def __init__(self, learning_rate, rho=0.9, eps=1e-6):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        if rho < 0.0:
            raise ValueError(f"AdaDelta rho should be >=0, {rho} was provided instead")
        _check_positive_eps(eps)
        self.rho = rho
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        rho, eps = self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        delta = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        state["v"] = v
        state["u"] = rho * state["u"] + (1 - rho) * mx.square(delta)
        return parameter - self._lr(gradient) * delta


class Adam(Optimizer):
    """Adam; bias_correction=False by default, as mlx.optimizers."""

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8, bias_correction=False):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        lr = self._lr(gradient)
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"], state["v"] = m, v
        if not self.bias_correction:
            return parameter - lr * m / (mx.sqrt(v) + self.eps)
        step = self.step.astype(mx.float32)
        c1 = (lr / (1 - mx.power(b1, step))).astype(gradient.dtype)
        c2 = mx.rsqrt(1 - mx.power(b2, step)).astype(gradient.dtype)
        return parameter - c1 * m / (mx.sqrt(v) * c2 + self.eps)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay first."""

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 bias_correction=False):
        super().__init__(learning_rate, betas, eps, bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state):
        decayed = parameter * (1 - self._lr(gradient) * self.weight_decay)
        return super().apply_single(gradient, decayed, state)


class Adamax(Adam):
    """Adam with the infinity norm: v = max(b2 v, |g|)."""

    def __init__(self, learning_rate, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(learning_rate, betas, eps)
        if not 0.0 <= eps:
            raise ValueError(f"Epsilon value should be >=0, {eps} was provided instead")

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"], state["v"] = m, v
        return parameter - self._lr(gradient) * m / (v + self.eps)


class Lion(Optimizer):
    """Lion: the sign of an interpolated momentum, decoupled weight decay."""

    def __init__(self, learning_rate, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        lr = self._lr(gradient)
        direction = b1 * state["m"] + (1 - b1) * gradient
        state["m"] = b2 * state["m"] + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = (1 - lr * self.weight_decay) * parameter
        return parameter - lr * mx.sign(direction)


class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern): second moments of matrices kept as row
    and column averages; relative step sizes scaled by the parameter's RMS."""

    def __init__(self, learning_rate=None, eps=(1e-30, 1e-3), clip_threshold=1.0,
                 decay_rate=-0.8, beta_1=None, weight_decay=0.0, scale_parameter=True,
                 relative_step=True, warmup_init=False):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter, state):
        if parameter.ndim >= 2:
            shape = parameter.shape
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], parameter.dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], parameter.dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    @staticmethod
    def _rms(x):
        return mx.sqrt(mx.mean(mx.square(x)))

    @staticmethod
    def _approximate_exp_moving_avg(row, col):
        """The factored estimate of 1/sqrt(E[g^2]): the outer product of the
        row factors (relative to their mean) and the column factors."""
        row_factor = mx.rsqrt(row / mx.mean(row, axis=-1, keepdims=True))
        return row_factor[..., :, None] * mx.rsqrt(col)[..., None, :]

    def _step_size(self, step, parameter_rms):
        if self.relative_step:
            cap = 1e-6 * step if self.warmup_init else 1e-2
            size = mx.minimum(cap, mx.rsqrt(step))
        else:
            size = self.learning_rate
        scale = mx.maximum(self.eps[1], parameter_rms) if self.scale_parameter else 1.0
        return scale * size

    def apply_single(self, gradient, parameter, state):
        step = self.step.astype(mx.float32)
        lr = self._step_size(step, self._rms(parameter)).astype(gradient.dtype)
        beta_2 = (1.0 - mx.power(step, self.decay_rate)).astype(gradient.dtype)
        squared = mx.square(gradient) + self.eps[0]
        if gradient.ndim >= 2:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(squared, axis=-1)
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(squared, axis=-2)
            state["exp_avg_sq_row"], state["exp_avg_sq_col"] = row, col
            update = self._approximate_exp_moving_avg(row, col) * gradient
        else:
            avg = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * squared
            state["exp_avg_sq"] = avg
            update = mx.rsqrt(avg) * gradient
        update = update / mx.maximum(1.0, self._rms(update) / self.clip_threshold)
        update = lr * update
        if self.beta_1 is not None:
            update = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = update
        if self.weight_decay != 0:
            parameter = parameter - self.weight_decay * lr * parameter
        return parameter - update


class Muon(Optimizer):
    """Momentum orthogonalised by Newton-Schulz iterations for matrices (and
    higher-rank weights flattened to matrices); plain momentum for vectors."""

    def __init__(self, learning_rate, momentum=0.95, weight_decay=0.01, nesterov=True, ns_steps=5):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    @staticmethod
    def _orthogonalize(x, steps):
        """Newton-Schulz quintic iteration toward the nearest semi-orthogonal matrix."""
        a, b, c = 3.4445, -4.7750, 2.0315
        tall = x.shape[-2] > x.shape[-1]
        if tall:
            x = x.swapaxes(-1, -2)
        x = x / (mx.sqrt(mx.sum(mx.square(x), axis=(-2, -1), keepdims=True)) + 1e-7)
        for _ in range(steps):
            gram = x @ x.swapaxes(-1, -2)
            x = a * x + (b * gram + c * (gram @ gram)) @ x
        return x.swapaxes(-1, -2) if tall else x

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = self.momentum * state["v"] + (1 - self.momentum) * gradient
        state["v"] = v
        update = gradient * (1 - self.momentum) + v * self.momentum if self.nesterov else v
        lr = self._lr(gradient)
        if update.ndim < 2:
            return parameter - lr * update
        shape = update.shape
        matrix = update.reshape(shape[0], -1) if update.ndim > 2 else update
        matrix = self._orthogonalize(matrix, self.ns_steps)
        scale = max(1.0, matrix.shape[-2] / matrix.shape[-1]) ** 0.5
        return parameter - lr * (matrix.reshape(shape) * scale).astype(gradient.dtype)


class MultiOptimizer(Optimizer):
    """Several optimizers over one model: parameter (path, array) goes to the
    first optimizer whose filter accepts it, else to the last one."""

    def __init__(self, optimizers, filters=()):
        super().__init__()
        self._state = {}
        filters = list(filters)
        if len(filters) != len(optimizers) - 1:
            raise ValueError(f"Given {len(filters)} filters but {len(optimizers) - 1} needed.")
        self.optimizers = list(optimizers)
        self.filters = filters + [lambda *_: True]

    def _split(self, tree):
        parts = [[] for _ in self.optimizers]
        for path, value in tree_flatten(tree):
            for i, accepts in enumerate(self.filters):
                if accepts(path, value):
                    parts[i].append((path, value))
                    break
        return [tree_unflatten(p) if p else {} for p in parts]

    def init(self, parameters):
        for optimizer, part in zip(self.optimizers, self._split(parameters)):
            optimizer.init(part)

    def apply_gradients(self, gradients, parameters):
        result = {}
        for optimizer, part in zip(self.optimizers, self._split(gradients)):
            result = tree_merge(result, optimizer.apply_gradients(part, parameters))
        return result

    @property
    def state(self):
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state):
        if "states" not in state or len(state["states"]) != len(self.optimizers):
            raise ValueError("Invalid state provided")
        for optimizer, s in zip(self.optimizers, state["states"]):
            optimizer.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        for optimizer in self.optimizers:
            optimizer.learning_rate = learning_rate


def clip_grad_norm(grads, max_norm):
    """(grads scaled so their global L2 norm is at most max_norm, the norm
    before scaling)."""
    if max_norm < 0:
        raise ValueError(f"max_norm must be non-negative, got {max_norm}")
    squared = tree_reduce(lambda acc, g: acc + mx.sum(mx.square(g)), grads, mx.array(0.0))
    total_norm = mx.sqrt(squared)
    factor = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_map(lambda g: g * factor, grads), total_norm

