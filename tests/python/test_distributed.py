"""weft.distributed: the group of one in this process, and two ranks under
mpirun (a worker script run by this interpreter), checked against NumPy."""
import os
import textwrap

import numpy as np
import pytest

import weft as mx

dist = mx.distributed

WORKER = textwrap.dedent(
    """
    import os
    import numpy as np
    import weft as mx
    dist = mx.distributed
    world = dist.init(strict=True)
    r, n = world.rank(), world.size()
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    mine = base + 100 * r
    every = [base + 100 * k for k in range(n)]
    np.testing.assert_array_equal(np.array(dist.all_sum(mx.array(mine))), sum(every))
    np.testing.assert_array_equal(np.array(dist.all_max(mx.array(mine))), every[-1])
    np.testing.assert_array_equal(np.array(dist.all_min(mx.array(mine))), every[0])
    np.testing.assert_array_equal(np.array(dist.all_gather(mx.array(mine))),
                                  np.concatenate(every))
    np.testing.assert_array_equal(np.array(dist.sum_scatter(mx.array(mine))),
                                  sum(every)[r * 4 // n:(r + 1) * 4 // n])
    peer = r ^ 1
    if r % 2 == 0:
        mx.eval(dist.send(mx.array(mine), peer))
        got = dist.recv((4, 3), mx.float32, peer)
    else:
        got = dist.recv_like(mx.array(mine), peer)
        mx.eval(got)
        mx.eval(dist.send(mx.array(mine), peer))
    np.testing.assert_array_equal(np.array(got), every[peer])
    half = world.split(r % 2)
    assert half.size() == (n + 1 - r % 2) // 2 and half.rank() == r // 2
    grads = {"w": mx.array(mine), "b": [mx.array(np.full(3, r, np.float32))]}
    avg = dist.average_gradients(grads, all_reduce_size=16)
    np.testing.assert_array_equal(np.array(avg["w"]), sum(every) / n)
    np.testing.assert_array_equal(np.array(avg["b"][0]), np.full(3, (n - 1) / 2, np.float32))
    # A mismatch raises on every rank.
    try:
        mx.eval(dist.all_sum(mx.zeros((3 + r,))))
    except RuntimeError as e:
        assert "do not match" in str(e)
    else:
        raise AssertionError("no error for a mismatch")
    # The gradient of a sum of every rank's loss.
    g = mx.grad(lambda x: (dist.all_sum(x) ** 2).sum())(mx.array(mine))
    np.testing.assert_array_equal(np.array(g), 2 * n * sum(every))
    # One write of the whole line: print writes its pieces one by one when
    # PYTHONUNBUFFERED is set, and mpirun interleaves the two ranks' pieces.
    os.write(1, ("rank %d ok\\n" % r).encode())
    """
)


def test_group_of_one():
    assert isinstance(dist.is_available(), bool)
    g = dist.init()
    assert (g.rank(), g.size()) == (0, 1)
    x = mx.array(np.arange(6, dtype=np.int32).reshape(3, 2))
    for op in (dist.all_sum, dist.all_max, dist.all_min, dist.all_gather, dist.sum_scatter):
        np.testing.assert_array_equal(np.array(op(x)), np.array(x))
        np.testing.assert_array_equal(np.array(op(x, group=g)), np.array(x))
    assert g.split(0).size() == 1
    with pytest.raises(ValueError):
        dist.send(x, 1)
    with pytest.raises(ValueError):
        dist.recv((2,), mx.float32, 1)
    with pytest.raises(ValueError):
        dist.init(backend="nccl")
    with pytest.raises(TypeError):
        dist.all_sum(x, group=3)
    assert dist.average_gradients({"a": x}) == {"a": x}


@pytest.mark.skipif(os.environ.get("WEFT_PY_SANITIZED") == "1",
                    reason="Open MPI under the sanitized interpreter: covered by the C test")
def test_two_ranks_under_mpirun(run_two_ranks):
    run_two_ranks(WORKER)
