"""Loss functions (mlx.nn.losses' names, arguments and default reductions)."""
import math

import weft as mx

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction):
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError("Invalid reduction. Must be 'none', 'mean', or 'sum'.")


def _same_shape(a, b, name):
    if a.shape != b.shape:
        raise ValueError(f"{name}: inputs of shape {a.shape} and targets of shape {b.shape} differ")


def _weighted(loss, weights):
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise ValueError(f"Weights with shape {weights.shape} is not the same as output loss "
                         f"with shape {loss.shape}.")
    return loss * weights


def cross_entropy(logits, targets, weights=None, axis=-1, label_smoothing=0.0, reduction="none"):
    """-log softmax(logits)[target]; targets are class indices (one axis
    fewer than logits) or probabilities (logits' shape)."""
    if not 0 <= label_smoothing < 1:
        raise ValueError(f"Label smoothing must in [0, 1), got {label_smoothing}.")
    probabilities = targets.ndim == logits.ndim
    axis = axis % logits.ndim
    # only the gaps between logits matter; shifting by the maximum keeps
    # large shared offsets from rounding the answer away
    logits = logits - mx.stop_gradient(mx.max(logits, axis=axis, keepdims=True))
    if probabilities:
        if targets.shape != logits.shape:
            raise ValueError(f"Targets shape {targets.shape} does not match logits shape "
                             f"{logits.shape}.")
        score = mx.sum(logits * targets, axis=axis)
    else:
        expected = logits.shape[:axis] + logits.shape[axis + 1:]
        if targets.shape != expected:
            raise ValueError(f"Targets shape {targets.shape} does not match logits shape "
                             f"{logits.shape}.")
        score = mx.take_along_axis(logits, mx.expand_dims(targets, axis), axis).squeeze(axis)
    if label_smoothing > 0:
        score = (1 - label_smoothing) * score + label_smoothing * mx.mean(logits, axis=axis)
    loss = mx.logsumexp(logits, axis=axis) - score
    return _reduce(_weighted(loss, weights), reduction)


def binary_cross_entropy(inputs, targets, weights=None, with_logits=True, reduction="mean"):
    """Binary cross entropy of logits (with_logits) or probabilities (logs
    clipped at -100, as PyTorch)."""
    _same_shape(inputs, targets, "binary_cross_entropy")
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_p = mx.maximum(mx.log(inputs), -100.0)
        log_not_p = mx.maximum(mx.log(1 - inputs), -100.0)
        loss = -(targets * log_p + (1 - targets) * log_not_p)
    return _reduce(_weighted(loss, weights), reduction)


def l1_loss(predictions, targets, reduction="mean"):
    _same_shape(predictions, targets, "l1_loss")
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions, targets, reduction="mean"):
    _same_shape(predictions, targets, "mse_loss")
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs, targets, axis=-1, reduction="none"):
    """-inputs[target], inputs being log probabilities."""
    axis = axis % inputs.ndim
    loss = -mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis).squeeze(axis)
    return _reduce(loss, reduction)


def gaussian_nll_loss(inputs, targets, vars, full=False, eps=1e-6, reduction="mean"):
    """Negative log likelihood of targets under N(inputs, vars)."""
    _same_shape(inputs, targets, "gaussian_nll_loss")
    if vars.shape != inputs.shape:
        raise ValueError(f"Inputs shape {inputs.shape} does not match vars shape {vars.shape}.")
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(inputs, targets, axis=-1, reduction="none"):
    """KL(targets || inputs), both log probabilities."""
    loss = mx.sum(mx.exp(targets) * (targets - inputs), axis=axis)
    return _reduce(loss, reduction)


def smooth_l1_loss(predictions, targets, beta=1.0, reduction="mean"):
    """Quadratic below beta, linear above."""
    _same_shape(predictions, targets, "smooth_l1_loss")
    diff = mx.abs(predictions - targets)
    loss = mx.where(diff < beta, 0.5 * mx.square(diff) / beta, diff - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(anchors, positives, negatives, axis=-1, p=2, margin=1.0, eps=1e-6,
                 reduction="none"):
    """max(d(a, p) - d(a, n) + margin, 0), d the p-norm distance."""
    def distance(a, b):
        return mx.power(mx.sum(mx.power(mx.abs(a - b), p), axis=axis) + eps, 1.0 / p)

    loss = mx.maximum(distance(anchors, positives) - distance(anchors, negatives) + margin, 0)
    return _reduce(loss, reduction)


def hinge_loss(inputs, targets, reduction="none"):
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(inputs, targets, delta=1.0, reduction="none"):
    errors = mx.abs(inputs - targets)
    quadratic = mx.minimum(errors, delta)
    linear = errors - quadratic
    return _reduce(0.5 * mx.square(quadratic) + delta * linear, reduction)


def log_cosh_loss(inputs, targets, reduction="none"):
    errors = inputs - targets
    return _reduce(mx.logaddexp(errors, -errors) - math.log(2), reduction)


def cosine_similarity_loss(x1, x2, axis=1, eps=1e-8, reduction="none"):
    """The cosine similarity of x1 and x2 along axis."""
    norm1 = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    norm2 = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(norm1 * norm2, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(inputs1, inputs2, targets, margin=0.0, reduction="none"):
    """max(0, -targets * (inputs1 - inputs2) + margin)."""
    if not (inputs1.shape == inputs2.shape == targets.shape):
        raise ValueError(f"The shapes of the arguments do not match: {inputs1.shape}, "
                         f"{inputs2.shape}, {targets.shape}.")
    return _reduce(mx.maximum(0, -targets * (inputs1 - inputs2) + margin), reduction)
