"""weft and MLX train the same small CNN on scikit-learn's digits: the same
initial weights (weft's, copied into MLX), the same batches, Adam inside each
framework's compile. Prints both frameworks' first 20 losses and their largest
difference; exits 1 when it exceeds 1e-4.

    python bench/peers/train_digits.py

Needs weft (with mx.conv2d), mlx (mlx[cpu] on Linux), numpy and
scikit-learn importable by the interpreter: weft from the installed wheel, the
others from the environment (the bench environment of scripts/bench-setup.sh
plus scikit-learn).
"""
import importlib
import sys

import numpy as np

STEPS = 20
BATCH = 32
TOLERANCE = 1e-4


def load(name):
    return (importlib.import_module(name + ".core" if name == "mlx" else name),
            importlib.import_module(name + ".nn"), importlib.import_module(name + ".optimizers"))


def make_model(nn):
    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.head = nn.Linear(2 * 2 * 32, 10)

        def __call__(self, x):
            x = self.pool(nn.relu(self.conv1(x)))
            x = self.pool(nn.relu(self.conv2(x)))
            return self.head(x.reshape(x.shape[0], -1))

    return DigitsCNN()


def losses(framework, weights, batches):
    """The first losses of `framework` ("weft" or "mlx") from `weights`
    (path -> NumPy array) over `batches` of (images, labels)."""
    mx, nn, optim = load(framework)
    model = make_model(nn)
    model.load_weights([(k, mx.array(v)) for k, v in weights.items()])
    opt = optim.Adam(learning_rate=2e-3)

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    state = [model.state, opt.state]

    def step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        opt.update(model, grads)
        return loss

    step = mx.compile(step, inputs=state, outputs=state)
    out = []
    for x, y in batches:
        loss = step(mx.array(x), mx.array(y))
        mx.eval(state)
        out.append(loss.item())
    return np.array(out)


def main():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("train_digits: scikit-learn is not importable here (pip install scikit-learn)")
        return 2
    weft = importlib.import_module("weft")
    if not hasattr(weft, "conv2d"):
        print("train_digits: this weft has no conv2d")
        return 2
    try:
        importlib.import_module("mlx.core")
    except ImportError as exc:
        print(f"train_digits: mlx is not importable here ({exc})")
        return 2

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(STEPS):
        idx = rng.choice(len(labels), BATCH, replace=False)
        batches.append((images[idx], labels[idx]))

    weft.random.seed(0)
    _, weft_nn, _ = load("weft")
    from weft.utils import tree_flatten

    weights = {k: np.array(v) for k, v in tree_flatten(make_model(weft_nn).parameters())}
    ours = losses("weft", weights, batches)
    theirs = losses("mlx", weights, batches)
    print(f"{'step':>4} {'weft':>12} {'mlx':>12} {'|diff|':>10}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        print(f"{i:4d} {a:12.7f} {b:12.7f} {abs(a - b):10.2e}")
    worst = float(np.max(np.abs(ours - theirs)))
    print(f"largest difference {worst:.2e} (tolerance {TOLERANCE:.0e})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
