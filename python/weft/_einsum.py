"""einsum on weft ops: operands are transposed to one order of all their
letters, multiplied with broadcasting (two operands at a time, contracting
letters no later operand or the output needs as soon as possible), and the
remaining letters are summed or transposed into the output order."""
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


def _contract(a_term, a, b_term, b, keep):
    letters = "".join(dict.fromkeys(a_term + b_term))

    def aligned(term, x):
        perm = [term.index(ch) for ch in letters if ch in term]
        x = _core.transpose(x, perm)
        shape = []
        it = iter(x.shape)
        for ch in letters:
            shape.append(next(it) if ch in term else 1)
        return _core.reshape(x, shape)

    prod = _core.multiply(aligned(a_term, a), aligned(b_term, b))
    drop = [i for i, ch in enumerate(letters) if ch not in keep]
    if drop:
        prod = _core.sum(prod, drop)
    return "".join(ch for ch in letters if ch in keep), prod


def einsum(subscripts, *operands):
    operands = [_core.array(o) if not isinstance(o, _core.array) else o for o in operands]
    terms, output = _parse(subscripts, operands)
    pairs = [_diagonal_reduce(t, x) for t, x in zip(terms, operands)]
    term, acc = pairs[0]
    for i in range(1, len(pairs)):
        later = "".join(t for t, _ in pairs[i + 1:]) + output
        term, acc = _contract(term, acc, pairs[i][0], pairs[i][1], set(later) | set())
    drop = [i for i, ch in enumerate(term) if ch not in output]
    if drop:
        acc = _core.sum(acc, drop)
        term = "".join(ch for ch in term if ch in output)
    if term != output:
        acc = _core.transpose(acc, [term.index(ch) for ch in output])
    return acc
