/*
 * indexing.c - a[index] and a[index] = value with NumPy's rules: ints, slices
 * (any step), None, Ellipsis, tuples of them, and integer arrays or lists
 * (advanced indexing). Basic indices are views (wf_slice + wf_reshape);
 * advanced ones gather with wf_take, several index arrays through one
 * linear index over the axes they select.
 */
#include "weft_py.h"

#include <string.h>

/* One entry of a normalized index (no Ellipsis, no None). */
typedef enum { ITEM_SLICE, ITEM_INT, ITEM_ARRAY } item_kind;

typedef struct {
    item_kind kind;
    int64_t start, stop, step; /* ITEM_SLICE, ITEM_INT (start) */
    wf_array *indices;         /* ITEM_ARRAY: owned */
} index_item;

typedef struct {
    int count; /* entries of items: one per axis of the (expanded) array */
    index_item items[WF_MAX_NDIM];
    bool has_array;
} parsed_index;

static void parsed_index_clear(parsed_index *p)
{
    for (int i = 0; i < p->count; i++)
        if (p->items[i].kind == ITEM_ARRAY)
            wf_release(p->items[i].indices);
    p->count = 0;
}

static bool is_array_index(PyObject *obj)
{
    return WeftArray_Check(obj) || PyList_Check(obj) ||
           (PyObject_CheckBuffer(obj) && !PyBytes_Check(obj));
}

static bool is_consuming(PyObject *obj)
{
    return obj != Py_None && obj != Py_Ellipsis;
}

/* The index as a tuple (a new reference). */
static PyObject *index_tuple(PyObject *index)
{
    if (PyTuple_Check(index))
        return Py_NewRef(index);
    return PyTuple_Pack(1, index);
}

/* Inserts the size-1 axes that None entries ask for, so the rest of the
 * index can treat each None as a full slice of its new axis. */
static wf_array *expand_for_none(wf_array *a, PyObject *tuple, bool *changed)
{
    int axes[WF_MAX_NDIM];
    int naxes = 0, position = 0, nconsuming = 0;
    const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t i = 0; i < n; i++)
        nconsuming += is_consuming(PyTuple_GET_ITEM(tuple, i));
    const int ndim = wf_array_ndim(a);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (item == Py_None) {
            if (naxes + ndim >= WF_MAX_NDIM) {
                PyErr_SetString(PyExc_IndexError, "too many dimensions from None");
                return NULL;
            }
            axes[naxes++] = position++;
        } else if (item == Py_Ellipsis) {
            position += ndim - nconsuming > 0 ? ndim - nconsuming : 0;
        } else {
            position++;
        }
    }
    *changed = naxes > 0;
    if (naxes == 0)
        return wf_retain_unscoped(a);
    wf_array *out = wf_expand_dims(a, axes, naxes);
    if (out == NULL)
        weftpy_raise_weft_error();
    return out;
}

static bool parse_int_item(PyObject *obj, int64_t dim, index_item *item)
{
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL)
        return false;
    long long v = PyLong_AsLongLong(index);
    Py_DECREF(index);
    if (v == -1 && PyErr_Occurred())
        return false;
    if (v > INT32_MAX || v < INT32_MIN) {
        /* MLX's indices are int32: a larger one is a ValueError, not IndexError */
        PyErr_Format(PyExc_ValueError, "index %lld does not fit in int32", v);
        return false;
    }
    if (v < -dim || v >= dim) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for an axis of size %lld", v,
                     (long long)dim);
        return false;
    }
    item->kind = ITEM_INT;
    item->start = v < 0 ? v + dim : v;
    return true;
}

/* An unpacked slice bound: None reads as PY_SSIZE_T_MIN/MAX, which pass. */
static bool slice_bound_fits(Py_ssize_t v)
{
    return v == PY_SSIZE_T_MAX || v == PY_SSIZE_T_MIN || (v >= INT32_MIN && v <= INT32_MAX);
}

static bool parse_slice_item(PyObject *obj, int64_t dim, index_item *item)
{
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(obj, &start, &stop, &step) < 0)
        return false;
    if (!slice_bound_fits(start) || !slice_bound_fits(stop) || !slice_bound_fits(step)) {
        PyErr_SetString(PyExc_ValueError, "slice bounds must fit in int32");
        return false;
    }
    PySlice_AdjustIndices((Py_ssize_t)dim, &start, &stop, step);
    item->kind = ITEM_SLICE;
    item->start = start;
    item->stop = stop;
    item->step = step;
    /* wf_slice takes NumPy's stop; for negative steps a stop of -1 after
     * adjusting means "before element 0", which wf_slice spells -dim - 1. */
    if (step < 0 && stop < 0)
        item->stop = -dim - 1;
    return true;
}

static bool parse_array_item(PyObject *obj, index_item *item)
{
    wf_array *indices = weftpy_array_from_object(obj, WF_DTYPE_COUNT);
    if (indices == NULL)
        return false;
    const wf_dtype dtype = wf_array_dtype(indices);
    if (dtype == WF_DTYPE_BOOL) {
        wf_release(indices);
        PyErr_SetString(PyExc_ValueError, "boolean mask indexing is not supported (its shape "
                                          "depends on the values); use weft.where");
        return false;
    }
    if (!weftpy_dtype_is_integer(dtype)) {
        wf_release(indices);
        PyErr_SetString(PyExc_ValueError, "arrays used as indices must be of integer type");
        return false;
    }
    item->kind = ITEM_ARRAY;
    item->indices = indices;
    return true;
}

/* Parses `tuple` (no None left) against an array of `ndim` dims of `shape`. */
static bool parse_index(PyObject *tuple, const int64_t *shape, int ndim, parsed_index *p)
{
    p->count = 0;
    p->has_array = false;
    const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    int nconsuming = 0, nnone = 0;
    bool seen_ellipsis = false;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (item == Py_Ellipsis) {
            if (seen_ellipsis) {
                PyErr_SetString(PyExc_ValueError, "an index can only have a single ellipsis");
                return false;
            }
            seen_ellipsis = true;
        } else if (item == Py_None) {
            nnone++;
        } else {
            nconsuming++;
        }
    }
    if (nconsuming + nnone > ndim) { /* ValueError as in MLX (NumPy raises IndexError) */
        PyErr_Format(PyExc_ValueError, "too many indices for an array of %d dimensions",
                     ndim - nnone);
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = PyTuple_GET_ITEM(tuple, i);
        if (obj == Py_Ellipsis || obj == Py_None) {
            /* None was expanded to a new axis: a full slice of it. Ellipsis
             * covers the axes no other entry names. */
            const int count = obj == Py_None ? 1 : ndim - nconsuming - nnone;
            for (int k = 0; k < count; k++) {
                p->items[p->count] = (index_item){ITEM_SLICE, 0, shape[p->count], 1, NULL};
                p->count++;
            }
            continue;
        }
        index_item *item = &p->items[p->count];
        const int64_t dim = shape[p->count];
        bool ok;
        if (PySlice_Check(obj))
            ok = parse_slice_item(obj, dim, item);
        else if (is_array_index(obj)) {
            ok = parse_array_item(obj, item);
            p->has_array |= ok;
        } else
            ok = parse_int_item(obj, dim, item);
        if (!ok) {
            parsed_index_clear(p);
            return false;
        }
        p->count++;
    }
    while (p->count < ndim) {
        p->items[p->count] = (index_item){ITEM_SLICE, 0, shape[p->count], 1, NULL};
        p->count++;
    }
    return true;
}

/* The basic part: slices as given, ints as one-element slices, arrays as
 * full slices (gathered afterwards). */
static wf_array *apply_slices(wf_array *a, const parsed_index *p)
{
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    const int64_t *shape = wf_array_shape(a);
    bool identity = true;
    for (int i = 0; i < p->count; i++) {
        const index_item *item = &p->items[i];
        if (item->kind == ITEM_SLICE) {
            starts[i] = item->start;
            stops[i] = item->stop;
            steps[i] = item->step;
            identity &= item->start == 0 && item->stop == shape[i] && item->step == 1;
        } else if (item->kind == ITEM_INT && !p->has_array) {
            starts[i] = item->start;
            stops[i] = item->start + 1;
            steps[i] = 1;
            identity &= shape[i] == 1;
        } else {
            starts[i] = 0;
            stops[i] = shape[i];
            steps[i] = 1;
        }
    }
    if (identity)
        return wf_retain_unscoped(a);
    return wf_slice(a, starts, stops, steps);
}

/* Basic indexing: the sliced array without the int-indexed axes. */
static wf_array *drop_int_axes(wf_array *sliced, const parsed_index *p)
{
    int64_t shape[WF_MAX_NDIM];
    int ndim = 0;
    bool any = false;
    const int64_t *in = wf_array_shape(sliced);
    for (int i = 0; i < p->count; i++) {
        if (p->items[i].kind == ITEM_INT)
            any = true;
        else
            shape[ndim++] = in[i];
    }
    if (!any)
        return wf_retain_unscoped(sliced);
    return wf_reshape(sliced, shape, ndim);
}

/* An index array with negative entries counted from the end, and entries
 * out of [0, dim) replaced by `dim` * `total` so the gather that uses the
 * combined index fails (no wrong element is ever read). */
static wf_array *normalized_indices(wf_array *indices, int64_t dim, int64_t total)
{
    wf_array *wide = wf_astype(indices, WF_DTYPE_I64);
    wf_array *zero = wf_scalar(0, WF_DTYPE_I64);
    wf_array *size = wf_scalar((double)dim, WF_DTYPE_I64);
    wf_array *negative = wf_less(wide, zero);
    wf_array *shifted = wf_add(wide, size);
    wf_array *fixed = wf_where(negative, shifted, wide);
    wf_array *low_ok = wf_greater_equal(fixed, zero);
    wf_array *high_ok = wf_less(fixed, size);
    wf_array *ok = wf_logical_and(low_ok, high_ok);
    wf_array *bad = wf_scalar((double)total, WF_DTYPE_I64);
    wf_array *out = wf_where(ok, fixed, bad);
    wf_array *temps[] = {wide, zero, size, negative, shifted, fixed, low_ok, high_ok, ok, bad};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++)
        wf_release(temps[i]);
    return out;
}

/* Advanced indexing on the sliced array: the index arrays (and ints, as 0-d
 * arrays) broadcast together; their shape replaces the axes they index, in
 * place when those axes are adjacent, else at the front (NumPy's rule). */
static wf_array *gather_advanced(wf_array *sliced, const parsed_index *p)
{
    int advanced[WF_MAX_NDIM], nadvanced = 0, other[WF_MAX_NDIM], nother = 0;
    for (int i = 0; i < p->count; i++) {
        if (p->items[i].kind == ITEM_SLICE)
            other[nother++] = i;
        else
            advanced[nadvanced++] = i;
    }
    bool adjacent = true;
    for (int i = 1; i < nadvanced; i++)
        adjacent &= advanced[i] == advanced[i - 1] + 1;
    /* Bring the advanced axes together: in place if adjacent, else first. */
    int perm[WF_MAX_NDIM], n = 0;
    const int insert_at = adjacent ? advanced[0] : 0;
    for (int i = 0; i < nother && other[i] < insert_at; i++)
        perm[n++] = other[i];
    const int before = n;
    for (int i = 0; i < nadvanced; i++)
        perm[n++] = advanced[i];
    for (int i = before; i < nother; i++)
        perm[n++] = other[i];
    wf_array *moved = wf_transpose(sliced, perm, n);
    if (moved == NULL)
        return NULL;
    const int64_t *mshape = wf_array_shape(moved);
    /* Merge the advanced axes into one and combine the indices row-major. */
    int64_t merged_shape[WF_MAX_NDIM];
    int merged_ndim = 0;
    int64_t total = 1;
    for (int i = 0; i < before; i++)
        merged_shape[merged_ndim++] = mshape[i];
    for (int i = 0; i < nadvanced; i++)
        total *= mshape[before + i];
    merged_shape[merged_ndim++] = total;
    for (int i = before + nadvanced; i < n; i++)
        merged_shape[merged_ndim++] = mshape[i];
    wf_array *merged = wf_reshape(moved, merged_shape, merged_ndim);
    wf_release(moved);
    wf_array *linear = NULL;
    int64_t stride = 1;
    for (int i = nadvanced - 1; i >= 0 && merged != NULL; i--) {
        const index_item *item = &p->items[advanced[i]];
        const int64_t dim = wf_array_shape(sliced)[advanced[i]];
        wf_array *indices = item->kind == ITEM_ARRAY ? wf_retain_unscoped(item->indices)
                                                     : wf_scalar((double)item->start, WF_DTYPE_I64);
        wf_array *fixed = nadvanced == 1 ? wf_retain_unscoped(indices)
                                         : normalized_indices(indices, dim, total);
        wf_release(indices);
        wf_array *scale = wf_scalar((double)stride, WF_DTYPE_I64);
        wf_array *term = stride == 1 ? wf_retain_unscoped(fixed) : wf_multiply(fixed, scale);
        wf_release(fixed);
        wf_release(scale);
        wf_array *sum = linear == NULL ? wf_retain_unscoped(term) : wf_add(linear, term);
        wf_release(term);
        wf_release(linear);
        linear = sum;
        stride *= dim;
    }
    wf_array *out = wf_take(merged, linear, before);
    wf_release(merged);
    wf_release(linear);
    return out;
}

/* a[index]: NULL with an exception set on failure. */
static wf_array *index_array(wf_array *a, PyObject *index)
{
    PyObject *tuple = index_tuple(index);
    if (tuple == NULL)
        return NULL;
    bool changed = false;
    wf_array *expanded = expand_for_none(a, tuple, &changed);
    wf_array *out = NULL;
    parsed_index p;
    if (expanded == NULL)
        goto done;
    if (!parse_index(tuple, wf_array_shape(expanded), wf_array_ndim(expanded), &p)) {
        wf_release(expanded);
        goto done;
    }
    wf_array *sliced = apply_slices(expanded, &p);
    wf_release(expanded);
    if (sliced != NULL)
        out = p.has_array ? gather_advanced(sliced, &p) : drop_int_axes(sliced, &p);
    wf_release(sliced);
    parsed_index_clear(&p);
    if (out == NULL)
        weftpy_raise_weft_error();
done:
    Py_DECREF(tuple);
    return out;
}

/* a[True] is a[None]; a[False] the same with the new axis empty (NumPy's
 * and MLX's rules for a Python bool index). */
static PyObject *bool_getitem(wf_array *a, bool keep)
{
    wf_array *expanded = index_array(a, Py_None);
    if (expanded == NULL || keep)
        return expanded != NULL ? weftpy_array_wrap(expanded) : NULL;
    int64_t starts[WF_MAX_NDIM] = {0}, stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    const int ndim = wf_array_ndim(expanded);
    for (int i = 0; i < ndim; i++) {
        stops[i] = i == 0 ? 0 : wf_array_dim(expanded, i);
        steps[i] = 1;
    }
    wf_array *out = wf_slice(expanded, starts, stops, steps);
    wf_release(expanded);
    if (out == NULL)
        return weftpy_raise_weft_error();
    return weftpy_array_wrap(out);
}

PyObject *weftpy_array_getitem(PyObject *self, PyObject *index)
{
    wf_array *a = ((WeftArray *)self)->handle;
    /* The common a[i] fast path: one slice and one reshape. */
    if (PyLong_CheckExact(index) && wf_array_ndim(a) > 0) {
        parsed_index p = {.count = 0, .has_array = false};
        const int64_t *shape = wf_array_shape(a);
        if (!parse_int_item(index, shape[0], &p.items[0]))
            return NULL;
        p.count = 1;
        for (int i = 1; i < wf_array_ndim(a); i++)
            p.items[p.count++] = (index_item){ITEM_SLICE, 0, shape[i], 1, NULL};
        wf_array *sliced = apply_slices(a, &p);
        wf_array *out = drop_int_axes(sliced, &p);
        wf_release(sliced);
        return weftpy_array_wrap(out);
    }
    if (PyBool_Check(index)) /* a 0-d mask: a new axis of 1 (True) or 0 (False) */
        return bool_getitem(a, index == Py_True);
    wf_array *out = index_array(a, index);
    return out != NULL ? weftpy_array_wrap(out) : NULL;
}

/* The bool mask `index` stands for (a bool array, a Python bool - a 0-d
 * mask: True selects everything, False nothing - or a list or NumPy array
 * of bools), as a new reference; NULL (no exception) for other indices. */
static wf_array *bool_mask_index(PyObject *index)
{
    if (PyBool_Check(index))
        return wf_scalar(index == Py_True, WF_DTYPE_BOOL);
    if (WeftArray_Check(index)) {
        wf_array *mask = ((WeftArray *)index)->handle;
        return wf_array_dtype(mask) == WF_DTYPE_BOOL ? wf_retain_unscoped(mask) : NULL;
    }
    if (!PyList_Check(index) && !PyObject_CheckBuffer(index))
        return NULL;
    wf_array *mask = weftpy_array_from_object(index, WF_DTYPE_COUNT);
    if (mask == NULL || wf_array_dtype(mask) != WF_DTYPE_BOOL) {
        PyErr_Clear();
        wf_release(mask);
        return NULL;
    }
    return mask;
}

/* The update without leading size-1 axes beyond the target's rank (NumPy
 * lets a (1, 2) value fill a (2,) slice); a new reference. */
static wf_array *drop_leading_ones(wf_array *update, int target_ndim)
{
    int drop = 0;
    const int ndim = wf_array_ndim(update);
    while (ndim - drop > target_ndim && wf_array_shape(update)[drop] == 1)
        drop++;
    if (drop == 0)
        return wf_retain_unscoped(update);
    return wf_reshape(update, wf_array_shape(update) + drop, ndim - drop);
}

/* a[index] combined with `update` by `mode` when the index has integer
 * arrays: the basic part (slices, None) selects a region, the arrays (and
 * ints, as 0-d arrays) scatter into it with wf_scatter, and the region is
 * written back. `update` is shaped like a[index] (broadcast). */
static wf_array *scatter_advanced(wf_array *a, PyObject *tuple, wf_array *update,
                                  wf_scatter_mode mode)
{
    wf_array *selected = index_array(a, tuple);
    if (selected == NULL)
        return NULL;
    parsed_index p = {.count = 0};
    wf_array *out = NULL, *region = NULL, *spread = NULL, *arranged = NULL, *shaped = NULL;
    wf_array *cast = NULL, *written = NULL;
    wf_array *indices[WF_MAX_NDIM];
    int nindices = 0, axes[WF_MAX_NDIM];
    /* None entries become full slices of size-1 axes inserted into a (they
     * keep their place in NumPy's adjacency rule), removed again at the end. */
    bool expanded = false;
    wf_array *x = expand_for_none(a, tuple, &expanded);
    if (x == NULL || !parse_index(tuple, wf_array_shape(x), wf_array_ndim(x), &p)) {
        wf_release(x);
        wf_release(selected);
        return NULL;
    }
    /* The region the slices select (arrays and ints keep their whole axis). */
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    const int ndim = p.count;
    for (int i = 0; i < ndim; i++) {
        const index_item *item = &p.items[i];
        const bool sliced = item->kind == ITEM_SLICE;
        starts[i] = sliced ? item->start : 0;
        stops[i] = sliced ? item->stop : wf_array_shape(x)[i];
        steps[i] = sliced ? item->step : 1;
        if (!sliced) {
            indices[nindices] = item->kind == ITEM_ARRAY
                                    ? wf_retain_unscoped(item->indices)
                                    : wf_scalar((double)item->start, WF_DTYPE_I64);
            axes[nindices++] = i;
        }
    }
    region = wf_slice(x, starts, stops, steps);
    if (region == NULL)
        goto done;
    /* The update, shaped like a[index], rearranged to I + S: the index
     * shape first (NumPy put it in place when the axes are adjacent), then
     * the region's shape with 1 on the indexed axes. */
    cast = wf_astype(update, wf_array_dtype(x));
    spread = wf_broadcast_to(cast, wf_array_shape(selected), wf_array_ndim(selected));
    if (spread == NULL)
        goto done;
    const int sel_ndim = wf_array_ndim(selected);
    const int nother = ndim - nindices;
    const int index_ndim = sel_ndim - nother;
    bool adjacent = true;
    for (int i = 1; i < nindices; i++)
        adjacent &= axes[i] == axes[i - 1] + 1;
    const int at = adjacent ? axes[0] : 0;
    int perm[WF_MAX_NDIM], n = 0;
    for (int i = 0; i < index_ndim; i++)
        perm[n++] = at + i;
    for (int i = 0; i < sel_ndim; i++)
        if (i < at || i >= at + index_ndim)
            perm[n++] = i;
    arranged = wf_transpose(spread, perm, n);
    int64_t target[2 * WF_MAX_NDIM];
    int tn = 0;
    if (arranged == NULL || index_ndim + ndim > WF_MAX_NDIM) {
        if (arranged != NULL)
            PyErr_SetString(PyExc_ValueError, "too many dimensions for an indexed update");
        goto done;
    }
    for (int i = 0; i < index_ndim; i++)
        target[tn++] = wf_array_shape(arranged)[i];
    const int64_t *region_shape = wf_array_shape(region);
    for (int i = 0; i < ndim; i++) {
        bool indexed = false;
        for (int k = 0; k < nindices; k++)
            indexed |= axes[k] == i;
        target[tn++] = indexed ? 1 : region_shape[i];
    }
    shaped = wf_reshape(arranged, target, tn);
    written = shaped != NULL ? wf_scatter(region, indices, nindices, shaped, axes, mode) : NULL;
    if (written != NULL) {
        bool whole = true;
        for (int i = 0; i < ndim; i++)
            whole &= starts[i] == 0 && stops[i] == wf_array_shape(x)[i] && steps[i] == 1;
        out = whole ? wf_retain_unscoped(written)
                    : wf_slice_update(x, written, starts, stops, steps);
    }
    if (out != NULL && expanded) {
        wf_array *back = wf_reshape(out, wf_array_shape(a), wf_array_ndim(a));
        wf_release(out);
        out = back;
    }
done:
    if (out == NULL && !PyErr_Occurred())
        weftpy_raise_weft_error();
    for (int i = 0; i < nindices; i++)
        wf_release(indices[i]);
    wf_array *temps[] = {region, cast, spread, arranged, shaped, written, selected, x};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++)
        wf_release(temps[i]);
    parsed_index_clear(&p);
    return out;
}

PyObject *weftpy_index_scatter(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *a_obj, *index, *value;
    int mode;
    if (!PyArg_ParseTuple(args, "O!OOi:_index_scatter", &WeftArray_Type, &a_obj, &index, &value,
                          &mode))
        return NULL;
    if (mode < WF_SCATTER_REPLACE || mode > WF_SCATTER_MIN) {
        PyErr_SetString(PyExc_ValueError, "_index_scatter: unknown mode");
        return NULL;
    }
    wf_array *update = weftpy_operand(value, a_obj);
    if (update == NULL)
        return NULL;
    PyObject *tuple = index_tuple(index);
    wf_array *out = tuple != NULL ? scatter_advanced(((WeftArray *)a_obj)->handle, tuple, update,
                                                     (wf_scatter_mode)mode)
                                  : NULL;
    Py_XDECREF(tuple);
    wf_release(update);
    return out != NULL ? weftpy_array_wrap(out) : NULL;
}

wf_array *weftpy_index_update(wf_array *a, PyObject *index, wf_array *update)
{
    wf_array *mask = bool_mask_index(index);
    if (mask != NULL) { /* MLX's masked_scatter: source elements in order */
        wf_array *out = wf_masked_scatter(a, mask, update);
        wf_release(mask);
        if (out == NULL)
            weftpy_raise_weft_error();
        return out;
    }
    PyObject *tuple = index_tuple(index);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++)
        if (is_array_index(PyTuple_GET_ITEM(tuple, i))) {
            wf_array *out = scatter_advanced(a, tuple, update, WF_SCATTER_REPLACE);
            Py_DECREF(tuple);
            return out;
        }
    /* None entries add no axis to `a`: the update is shaped like a[index]
     * and then reshaped to the slice without them. */
    wf_array *selected = index_array(a, tuple);
    if (selected == NULL) {
        Py_DECREF(tuple);
        return NULL;
    }
    PyObject *no_none = PyTuple_New(0);
    wf_array *out = NULL;
    parsed_index p = {.count = 0};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple) && no_none != NULL; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (item == Py_None)
            continue;
        PyObject *one = PyTuple_Pack(1, item);
        PyObject *joined = one != NULL ? PySequence_Concat(no_none, one) : NULL;
        Py_XDECREF(one);
        Py_SETREF(no_none, joined);
    }
    if (no_none == NULL || !parse_index(no_none, wf_array_shape(a), wf_array_ndim(a), &p))
        goto done;
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM], slice_shape[WF_MAX_NDIM];
    for (int i = 0; i < p.count; i++) {
        const index_item *item = &p.items[i];
        const bool single = item->kind == ITEM_INT;
        starts[i] = item->start;
        stops[i] = single ? item->start + 1 : item->stop;
        steps[i] = single ? 1 : item->step;
    }
    wf_array *region = wf_slice(a, starts, stops, steps);
    if (region == NULL)
        goto fail;
    const int slice_ndim = wf_array_ndim(region);
    if (slice_ndim > 0) /* a 0-d region's shape is NULL (memcpy from NULL is undefined) */
        memcpy(slice_shape, wf_array_shape(region), sizeof(int64_t) * (size_t)slice_ndim);
    wf_release(region);
    wf_array *trimmed = drop_leading_ones(update, wf_array_ndim(selected));
    wf_array *cast = trimmed != NULL ? wf_astype(trimmed, wf_array_dtype(a)) : NULL;
    wf_release(trimmed);
    wf_array *spread = wf_broadcast_to(cast, wf_array_shape(selected), wf_array_ndim(selected));
    wf_array *shaped = wf_reshape(spread, slice_shape, slice_ndim);
    out = wf_slice_update(a, shaped, starts, stops, steps);
    wf_release(cast);
    wf_release(spread);
    wf_release(shaped);
fail:
    if (out == NULL)
        weftpy_raise_weft_error();
done:
    parsed_index_clear(&p);
    Py_XDECREF(no_none);
    wf_release(selected);
    Py_DECREF(tuple);
    return out;
}

int weftpy_array_setitem(PyObject *self, PyObject *index, PyObject *value)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "weft arrays do not support item deletion");
        return -1;
    }
    WeftArray *array = (WeftArray *)self;
    wf_array *update = weftpy_operand(value, self);
    if (update == NULL)
        return -1;
    wf_array *out = weftpy_index_update(array->handle, index, update);
    wf_release(update);
    if (out == NULL)
        return -1;
    weftpy_array_replace(array, out);
    return 0;
}
