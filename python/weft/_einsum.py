"""einsum on weft ops. Repeated letters in one term take the diagonal; the
operands are then contracted two at a time along a greedy path (the one
NumPy's and MLX's einsum_path choose: at each step the pair whose
contraction shrinks the data most, then the cheapest), each pair as one
batched matmul; what is left is summed or transposed into the output
order."""
import math as _math

from . import _core


def _parse(subscripts, operands):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, output = subscripts.split("->")
    else:
        inputs, output = subscripts, None
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} terms for {len(operands)} operands")
    expanded = []
    # The axes an ellipsis covers align from the right across operands (they
    # broadcast), so each operand takes the last n of the widest one's letters.
    widest = max([op.ndim - (len(term) - 3) for term, op in zip(terms, operands)
                  if "..." in term] or [0])
    ellipsis_letters = "".join(chr(ord("A") + i) for i in range(max(widest, 0)))
    for term, op in zip(terms, operands):
        if "..." in term:
            n = op.ndim - (len(term) - 3)
            if n < 0:
                raise ValueError(f"einsum: term '{term}' has more letters than its operand has dims")
            term = term.replace("...", ellipsis_letters[len(ellipsis_letters) - n:] if n else "")
        if len(term) != op.ndim:
            raise ValueError(f"einsum: term '{term}' does not match an operand of {op.ndim} dims")
        expanded.append(term)
    if output is None:
        counts = {}
        for term in expanded:
            for ch in term:
                counts[ch] = counts.get(ch, 0) + 1
        output = ellipsis_letters + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ellipsis_letters))
    else:
        output = output.replace("...", ellipsis_letters)
    return expanded, output


def _diagonal_reduce(term, x):
    """Repeated letters in one term take the diagonal."""
    while len(set(term)) != len(term):
        for i, ch in enumerate(term):
            j = term.find(ch, i + 1)
            if j >= 0:
                break
        n = x.shape[i]
        moved = _core.moveaxis(_core.moveaxis(x, i, -1), j - 1 if j > i else j, -1)
        flat = _core.reshape(moved, list(moved.shape[:-2]) + [n * n])
        idx = _core.multiply(_core.arange(n), n + 1)
        x = _core.take(flat, idx, axis=-1)
        term = term[:i] + term[i + 1:j] + term[j + 1:] + ch
    return term, x


def _size(letters, sizes):
    return _math.prod(sizes[ch] for ch in letters)


def _flops(letters, removes, nterms, sizes):
    """The cost model of a contraction over `letters`: one multiply per
    extra term, one add if letters are summed away."""
    return _size(letters, sizes) * (max(1, nterms - 1) + (1 if removes else 0))


def _contraction(positions, sets, output):
    """The letters a contraction of sets[positions] keeps, and all it touches."""
    touched = set().union(*(sets[p] for p in positions))
    others = set(output).union(*(s for i, s in enumerate(sets) if i not in positions))
    return touched & others, touched


def _candidate(positions, sets, output, sizes, limit, path_cost, naive_cost):
    kept, touched = _contraction(positions, sets, output)
    new_size = _size(kept, sizes)
    if new_size > limit:
        return None
    shrink = sum(_size(sets[p], sizes) for p in positions) - new_size
    cost = _flops(touched, touched - kept, len(positions), sizes)
    if path_cost + cost > naive_cost:
        return None
    rest = [s for i, s in enumerate(sets) if i not in positions] + [kept]
    return (-shrink, cost), positions, rest


def _greedy_path(sets, output, sizes, limit):
    n = len(sets)
    if n == 1:
        return [(0,)]
    if n == 2:
        return [(0, 1)]
    kept, touched = _contraction(range(n), sets, output)
    naive_cost = _flops(touched, touched - kept, n, sizes)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    known, path, path_cost = [], [], 0
    for _ in range(n - 1):
        for pos in pairs:
            if sets[pos[0]].isdisjoint(sets[pos[1]]):
                continue
            found = _candidate(pos, sets, output, sizes, limit, path_cost, naive_cost)
            if found is not None:
                known.append(found)
        if not known:  # only outer products are left
            for pos in ((i, j) for i in range(len(sets)) for j in range(i + 1, len(sets))):
                found = _candidate(pos, sets, output, sizes, limit, path_cost, naive_cost)
                if found is not None:
                    known.append(found)
            if not known:
                path.append(tuple(range(len(sets))))
                break
        best = min(known, key=lambda c: c[0])
        known = _after_choice(known, best)
        sets = best[2]
        path.append(best[1])
        path_cost += best[0][1]
        last = len(sets) - 1
        pairs = [(i, last) for i in range(last)]
    return path


def _after_choice(known, best):
    """The other candidates after `best` is taken, as NumPy keeps them: their
    keys as they were, positions renumbered for the new list (best's two
    operands gone, their result at the end), and the list each would leave
    rebuilt the same way."""
    x, y = best[1]
    merged = best[2][-1]
    out = []
    for key, pos, rest in known:
        if x in pos or y in pos:
            continue
        gone = {q - sum(p < q for p in pos) for q in (x, y)}
        others = [s for i, s in enumerate(rest[:-1]) if i not in gone]
        out.append((key, tuple(p - (p > x) - (p > y) for p in pos), others + [merged, rest[-1]]))
    return out


def _plan(subscripts, operands):
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a str, not {type(subscripts).__name__}")
    terms, output = _parse(subscripts, operands)
    sizes = {}
    for term, op in zip(terms, operands):
        for ch, n in zip(term, op.shape):
            if sizes.get(ch, 1) == 1:
                sizes[ch] = n
            elif n not in (1, sizes[ch]):
                raise ValueError(f"einsum: letter '{ch}' has sizes {sizes[ch]} and {n}")
    sets = [set(t) for t in terms]
    limit = max([_size(t, sizes) for t in terms] + [_size(output, sizes)])
    if len(terms) <= 2 or set().union(*sets) == set(output):
        path = [tuple(range(len(terms)))]
    else:
        path = _greedy_path(sets, output, sizes, limit)
    return terms, output, sizes, path


def _sum_unneeded(term, x, needed):
    drop = [i for i, ch in enumerate(term) if ch not in needed]
    if not drop:
        return term, x
    return "".join(ch for ch in term if ch in needed), _core.sum(x, drop)


def _contract_pair(a_term, a, b_term, b, keep):
    """a and b contracted over the letters they share that `keep` lacks, as
    one batched matmul: (batch, a-only, summed) @ (batch, summed, b-only)."""
    a_term, a = _sum_unneeded(a_term, a, keep | set(b_term))
    b_term, b = _sum_unneeded(b_term, b, keep | set(a_term))
    batch = [ch for ch in a_term if ch in b_term and ch in keep]
    summed = [ch for ch in a_term if ch in b_term and ch not in keep]
    a_only = [ch for ch in a_term if ch not in b_term]
    b_only = [ch for ch in b_term if ch not in a_term]
    a_size = dict(zip(a_term, a.shape))
    b_size = dict(zip(b_term, b.shape))
    inexact = (_core.float16, _core.bfloat16, _core.float32, _core.float64, _core.complex64)
    if ((a.dtype not in inexact and b.dtype not in inexact)
            or any(a_size[ch] != b_size[ch] for ch in summed)):
        # weft's matmul is for float and complex types, and a summed letter
        # that broadcasts (size 1 on one side) does not fit one: multiply and sum
        letters = batch + a_only + summed + b_only
        prod = _core.multiply(_aligned(a_term, a, letters), _aligned(b_term, b, letters))
        return _sum_unneeded("".join(letters), prod, set(batch + a_only + b_only))
    shape = {ch: n for term, x in ((a_term, a), (b_term, b)) for ch, n in zip(term, x.shape)}
    bsz = [max(a.shape[a_term.index(ch)], b.shape[b_term.index(ch)]) for ch in batch]
    m, k, n = (_math.prod(shape[ch] for ch in g) for g in (a_only, summed, b_only))
    am = _core.transpose(a, [a_term.index(ch) for ch in batch + a_only + summed])
    bm = _core.transpose(b, [b_term.index(ch) for ch in batch + summed + b_only])
    am = _core.reshape(am, list(am.shape[:len(batch)]) + [m, k])
    bm = _core.reshape(bm, list(bm.shape[:len(batch)]) + [k, n])
    out = _core.matmul(am, bm)
    out = _core.reshape(out, bsz + [shape[ch] for ch in a_only] + [shape[ch] for ch in b_only])
    return "".join(batch + a_only + b_only), out


def _aligned(term, x, letters):
    """x with its axes in `letters` order, size 1 where it lacks a letter."""
    x = _core.transpose(x, [term.index(ch) for ch in letters if ch in term])
    it = iter(x.shape)
    return _core.reshape(x, [next(it) if ch in term else 1 for ch in letters])


def einsum(subscripts, *operands, stream=None):
    operands = [_core.array(o) if not isinstance(o, _core.array) else o for o in operands]
    terms, output, _, path = _plan(subscripts, operands)
    work = [_diagonal_reduce(t, x) for t, x in zip(terms, operands)]
    for step in path:
        group = [work[p] for p in step]
        work = [w for i, w in enumerate(work) if i not in step]
        needed = set(output).union(*(set(t) for t, _ in work))
        term, acc = _sum_unneeded(group[0][0], group[0][1],
                                  needed.union(*(set(t) for t, _ in group[1:])))
        for i in range(1, len(group)):
            keep = needed.union(*(set(t) for t, _ in group[i + 1:]))
            term, acc = _contract_pair(term, acc, group[i][0], group[i][1], keep)
        work.append((term, acc))
    (term, acc), = work
    term, acc = _sum_unneeded(term, acc, set(output))
    if term != output:
        acc = _core.transpose(acc, [term.index(ch) for ch in output])
    return acc


def einsum_path(subscripts, *operands):
    """The contraction order einsum follows, as (path, report): the path is
    a list of tuples of positions in the list of operands left (each
    contraction's result goes to the end), as mlx.core.einsum_path."""
    operands = [_core.array(o) if not isinstance(o, _core.array) else o for o in operands]
    terms, output, sizes, path = _plan(subscripts, operands)
    kept, touched = _contraction(range(len(terms)), [set(t) for t in terms], output)
    naive = _flops(touched, touched - kept, len(terms), sizes)
    lines = [f"einsum {','.join(terms)}->{output}", f"naive cost: {naive:,}"]
    sets = [set(t) for t in terms]
    total = 0
    for step in path:
        kept, touched = _contraction(step, sets, output)
        cost = _flops(touched, touched - kept, len(step), sizes)
        total += cost
        lines.append(f"contract {step}: {''.join(sorted(touched))} -> "
                     f"{''.join(sorted(kept))} (cost {cost:,})")
        sets = [s for i, s in enumerate(sets) if i not in step] + [kept]
    lines.append(f"path cost: {total:,}")
    return path, "\n".join(lines)
