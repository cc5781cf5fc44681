"""A small convolutional network trained with weft.nn + weft.optimizers inside
mx.compile learns scikit-learn's handwritten digits (1,797 8x8 images):
>= 98% accuracy on 360 held-out images."""
import os

import numpy as np
import pytest

import weft as mx
import weft.nn as nn
import weft.optimizers as optim

SANITIZED = os.environ.get("WEFT_PY_SANITIZED") == "1"

try:
    from sklearn.datasets import load_digits
except ImportError:
    load_digits = None

pytestmark = [
    pytest.mark.skipif(load_digits is None,
                       reason="needs scikit-learn's bundled digits (pip install scikit-learn)"),
    pytest.mark.skipif(SANITIZED, reason="a training run: release build only"),
    pytest.mark.skipif(not hasattr(mx, "conv2d"), reason="the binding has no mx.conv2d yet"),
]


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(2 * 2 * 32, 10)

    def __call__(self, x):
        x = self.pool(nn.relu(self.conv1(x)))   # (N, 4, 4, 16)
        x = self.pool(nn.relu(self.conv2(x)))   # (N, 2, 2, 32)
        return self.head(x.reshape(x.shape[0], -1))


def test_cnn_learns_digits_inside_compile():
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(labels))
    test, train = order[:360], order[360:]
    x_train, y_train = mx.array(images[train]), mx.array(labels[train])
    x_test = mx.array(images[test])

    mx.random.seed(0)
    model = DigitsCNN()
    opt = optim.Adam(learning_rate=2e-3)

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    state = [model.state, opt.state]

    def step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        opt.update(model, grads)
        return loss

    step = mx.compile(step, inputs=state, outputs=state)

    batch = 32
    rng = np.random.default_rng(1)
    losses = []
    for epoch in range(15):
        perm = rng.permutation(len(train))
        for start in range(0, len(train) - batch + 1, batch):
            idx = mx.array(perm[start:start + batch])
            losses.append(step(x_train[idx], y_train[idx]))
            mx.eval(state)
    first, last = losses[0].item(), np.mean([x.item() for x in losses[-10:]])
    assert last < 0.1 * first

    predictions = np.array(mx.argmax(model(x_test), axis=1))
    accuracy = float((predictions == labels[test]).mean())
    assert accuracy >= 0.98, accuracy
