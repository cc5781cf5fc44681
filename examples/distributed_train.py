"""Data-parallel training with weft.nn over weft.distributed (issue 29).

An MLP learns scikit-learn's handwritten digits (8x8 images). Each rank takes
its B rows of every global batch of size x B rows; the compiled step computes
the rank's gradients, averages them over the ranks with
weft.nn.utils.average_gradients (one all_sum, rank order), and every rank
applies the same Adam update.

    mpirun --allow-run-as-root --oversubscribe -np 2 python examples/distributed_train.py
    python examples/distributed_train.py --emulate 2    # one process, the same run
    python examples/distributed_train.py --whole 2      # one process, 2B rows at once

Rank 0 then replays the run in its own process, the global batch of size x B
rows taken as size micro-batches whose gradients and losses are added in rank
order and divided by size, exactly what all_sum computes: its losses must
equal the distributed ones bit for bit, step by step (the exit status says).
One process taking the size x B rows at once (one matmul over all rows, one
mean) adds the rows' contributions in another order, so its losses agree only
to rounding: the largest relative difference is printed.
"""
import argparse
import sys

import numpy as np

import weft as mx
import weft.nn as nn
import weft.optimizers as optim
from weft.nn.utils import average_gradients
from weft.utils import tree_map


class MLP(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.hidden = nn.Linear(64, hidden)
        self.out = nn.Linear(hidden, 10)

    def __call__(self, x):
        return self.out(nn.relu(self.hidden(x)))


def load_data():
    """(train images, train labels, test images, test labels) as NumPy arrays."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32).reshape(-1, 64)
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(labels))
    test, train = order[:360], order[360:]
    return images[train], labels[train], images[test], labels[test]


def global_batches(n_train, rows, steps):
    """The row indices of every step's global batch (the same on every rank)."""
    rng = np.random.default_rng(1)
    batches, perm = [], np.array([], dtype=np.int64)
    while len(batches) < steps:
        if len(perm) < rows:
            perm = np.concatenate([perm, rng.permutation(n_train)])
        batches.append(perm[:rows])
        perm = perm[rows:]
    return batches


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def fresh_model():
    mx.random.seed(0)
    model = MLP()
    mx.eval(model.parameters())
    return model, optim.Adam(learning_rate=1e-2)


def train(mode, ranks, batch, steps, data):
    """Losses (float32, one per step) and the trained model.

    mode "distributed": this rank's share under the world group;
    "emulate": one process, `ranks` micro-batches added in rank order;
    "whole": one process, ranks * batch rows at once."""
    x_train, y_train = mx.array(data[0]), mx.array(data[1])
    model, opt = fresh_model()
    state = [model.state, opt.state]
    grad_fn = nn.value_and_grad(model, loss_fn)

    if mode == "distributed":
        world = mx.distributed.init(strict=ranks > 1)

        def step(x, y):
            loss, grads = grad_fn(model, x, y)
            opt.update(model, average_gradients(grads))
            return mx.distributed.all_sum(loss) / world.size()
    elif mode == "emulate":
        def step(*xy):
            results = [grad_fn(model, xy[2 * k], xy[2 * k + 1]) for k in range(ranks)]
            loss, grads = results[0]
            for other_loss, other_grads in results[1:]:  # rank order, as all_sum
                loss = loss + other_loss
                grads = tree_map(lambda a, b: a + b, grads, other_grads)
            opt.update(model, tree_map(lambda g: g / ranks, grads))
            return loss / ranks
    else:
        def step(x, y):
            loss, grads = grad_fn(model, x, y)
            opt.update(model, grads)
            return loss

    step = mx.compile(step, inputs=state, outputs=state)
    rank = mx.distributed.init().rank() if mode == "distributed" else 0
    losses = []
    for rows in global_batches(len(data[1]), ranks * batch, steps):
        idx = [mx.array(rows[k * batch:(k + 1) * batch]) for k in range(ranks)]
        if mode == "distributed":
            args = (x_train[idx[rank]], y_train[idx[rank]])
        elif mode == "emulate":
            args = tuple(a for i in idx for a in (x_train[i], y_train[i]))
        else:
            whole = mx.array(rows)
            args = (x_train[whole], y_train[whole])
        loss = step(*args)
        mx.eval(loss, state)
        losses.append(np.array(loss, dtype=np.float32))
    return np.array(losses, dtype=np.float32), model


def accuracy(model, data):
    predictions = np.array(mx.argmax(model(mx.array(data[2])), axis=1))
    return float((predictions == data[3]).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="rows per rank (B)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--emulate", type=int, metavar="N",
                        help="one process: N micro-batches of B rows, added in rank order")
    parser.add_argument("--whole", type=int, metavar="N", help="one process: N x B rows at once")
    parser.add_argument("--losses", help="write the losses (float32, .npy) here (rank 0)")
    args = parser.parse_args()
    data = load_data()
    if args.emulate or args.whole:
        mode, ranks = ("emulate", args.emulate) if args.emulate else ("whole", args.whole)
        rank = 0
    else:
        mode = "distributed"
        ranks = mx.distributed.init().size()
        rank = mx.distributed.init().rank()
    losses, model = train(mode, ranks, args.batch, args.steps, data)
    if rank != 0:
        return 0
    if args.losses:
        np.save(args.losses, losses)
    print(f"{mode}, {ranks} x {args.batch} rows per step: loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f} in {args.steps} steps, test accuracy {accuracy(model, data):.3f}")
    if mode != "distributed":
        return 0
    same, _ = train("emulate", ranks, args.batch, args.steps, data)
    whole, _ = train("whole", ranks, args.batch, args.steps, data)
    differing = np.flatnonzero(same.view(np.uint32) != losses.view(np.uint32))
    print(f"one process, {ranks} micro-batches of {args.batch} rows in rank order: "
          + ("the same bits at every step" if not len(differing) else
             f"DIFFERENT bits from step {differing[0]}"))
    relative = np.abs(whole - losses) / np.abs(whole)
    print(f"one process, {ranks * args.batch} rows at once: largest relative loss difference "
          f"{relative.max():.2e} (the sums over the batch rows run in another order)")
    return 1 if len(differing) else 0


if __name__ == "__main__":
    sys.exit(main())
