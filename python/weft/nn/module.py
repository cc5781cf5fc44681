"""nn.Module: a dict of parameters (arrays), sub-modules and containers of them.

As in mlx.nn, attributes that are arrays, dicts, lists or tuples live in the
dict itself (so a model *is* its parameter tree); anything else is a plain
attribute. Keys starting with "_" are never parameters.
"""
import weft as mx

from ..utils import tree_flatten, tree_unflatten


def _is_array(value):
    return isinstance(value, mx.array)


class Module(dict):
    """Base class of every layer; call it like a function."""

    def __init__(self):
        self._no_grad = set()
        self._training = True

    # ------------------------------------------------------------ attributes

    @property
    def training(self):
        """True in training mode (dropout active, batch statistics used)."""
        return self._training

    @property
    def state(self):
        """Everything the module holds (the dict itself): what mx.compile takes
        as inputs/outputs so parameters and statistics update in place."""
        return self

    def __getattr__(self, key):
        if key in self:
            return self[key]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    def __setattr__(self, key, value):
        if isinstance(value, (mx.array, dict, list, tuple)):
            if key in self.__dict__:
                object.__delattr__(self, key)
            self[key] = value
        else:
            if key in self:
                del self[key]
            object.__setattr__(self, key, value)

    def __delattr__(self, key):
        if key in self:
            del self[key]
        else:
            object.__delattr__(self, key)

    # dicts are unhashable; modules are compared and hashed by identity
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def _extra_repr(self):
        return ""

    def __repr__(self):
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        head = f"{type(self).__name__}({self._extra_repr()}"
        if not children:
            return head + ")"
        lines = [f"  ({k}): " + repr(m).replace("\n", "\n  ") for k, m in children]
        return head + "\n" + "\n".join(lines) + "\n)"

    # ------------------------------------------------------------ traversal

    @staticmethod
    def is_module(value):
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value):
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value):
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value):
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(self, filter_fn, map_fn=None, is_leaf_fn=None):
        """The tree of the members that filter_fn(module, key, value) keeps,
        with map_fn applied to the leaves is_leaf_fn(module, key, value) picks
        (default: arrays)."""
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (lambda m, k, v: _is_array(v))
        return {k: _unwrap(self, k, v, filter_fn, map_fn, is_leaf_fn)
                for k, v in self.items() if filter_fn(self, k, v)}

    def parameters(self):
        """Every array of the module and its children, as nested dicts/lists."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self):
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self):
        """The direct sub-modules (inside their containers)."""
        return self.filter_and_map(self.valid_child_filter,
                                   is_leaf_fn=lambda m, k, v: isinstance(v, Module))

    def leaf_modules(self):
        """The sub-modules that have no sub-modules of their own."""
        def is_leaf_module(m, k, v):
            return isinstance(v, Module) and not tree_flatten(v.children(), is_leaf=self.is_module)

        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=is_leaf_module)

    def apply_to_modules(self, apply_fn):
        """apply_fn(path, module) on this module and every sub-module, parents first."""
        stack = [("", self)]
        while stack:
            prefix, module = stack.pop()
            apply_fn(prefix, module)
            child_prefix = "." + prefix if prefix else ""
            stack.extend(tree_flatten(module.children(), prefix=child_prefix, is_leaf=self.is_module))
        return self

    def modules(self):
        """This module and every sub-module."""
        out = []
        self.apply_to_modules(lambda _, m: out.append(m))
        return out

    def named_modules(self):
        """(path, module) for this module ("") and every sub-module."""
        out = []
        self.apply_to_modules(lambda name, m: out.append((name, m)))
        return out

    # ------------------------------------------------------------ updates

    def update(self, parameters, strict=True):
        """Replaces parameters by those in the tree `parameters`. strict: every
        key must exist and replace an array by an array (of any shape, as in
        MLX: shard_inplace cuts parameters this way)."""
        _update_parameters(self, parameters, strict)
        return self

    def update_modules(self, modules, strict=True):
        """Replaces sub-modules by those in the tree `modules`."""
        _update_modules(self, modules, strict)
        return self

    def apply(self, map_fn, filter_fn=None):
        """Each parameter (that filter_fn keeps) replaced by map_fn(parameter)."""
        filter_fn = filter_fn or self.valid_parameter_filter
        self.update(self.filter_and_map(filter_fn, map_fn), strict=False)
        return self

    def set_dtype(self, dtype, predicate=lambda d: mx.issubdtype(d, mx.floating)):
        """Casts the parameters whose dtype predicate accepts (default: the
        floating ones; None: all)."""
        return self.apply(lambda x: x.astype(dtype) if predicate is None or predicate(x.dtype) else x)

    # ------------------------------------------------------------ freezing

    def _check_keys_exist(self, keys, recurse):
        """strict freeze/unfreeze: each key must name a member of this module
        (or, with recurse, of at least one of its modules)."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        modules = self.modules() if recurse else [self]
        for k in keys:
            if not any(k in m for m in modules):
                raise KeyError(f"Module doesn't contain member {k}.")
        return keys

    def freeze(self, *, recurse=True, keys=None, strict=False):
        """Excludes parameters from trainable_parameters(): those named in keys
        (a name or a list), else all; in sub-modules too when recurse."""
        if keys is not None:
            keys = self._check_keys_exist(keys, recurse) if strict else \
                ([keys] if isinstance(keys, str) else list(keys))

        def freeze_one(_, module):
            if keys is None:
                own = module.filter_and_map(
                    lambda m, k, v: not isinstance(v, Module) and m.valid_parameter_filter(m, k, v))
                module._no_grad.update(k for k, _ in tree_flatten(own))
            else:
                module._no_grad.update(keys)

        if recurse:
            self.apply_to_modules(freeze_one)
        else:
            freeze_one("", self)
        return self

    def unfreeze(self, *, recurse=True, keys=None, strict=False):
        """Undoes freeze for keys (all when None), in sub-modules too when recurse."""
        if keys is not None:
            keys = self._check_keys_exist(keys, recurse) if strict else \
                ([keys] if isinstance(keys, str) else list(keys))

        def unfreeze_one(_, module):
            if keys is None:
                module._no_grad.clear()
            else:
                module._no_grad.difference_update(keys)

        if recurse:
            self.apply_to_modules(unfreeze_one)
        else:
            unfreeze_one("", self)
        return self

    # ------------------------------------------------------------ modes

    def _set_training_mode(self, mode):
        self._training = mode

    def train(self, mode=True):
        """Training mode (or evaluation mode with mode=False), recursively."""
        self.apply_to_modules(lambda _, m: m._set_training_mode(bool(mode)))
        return self

    def eval(self):
        return self.train(False)

    # ------------------------------------------------------------ files

    def load_weights(self, file_or_weights, strict=True):
        """Parameters from a .safetensors/.npz file or a list of (path, array)
        pairs. strict: the names and shapes must match the model's exactly."""
        if isinstance(file_or_weights, (list, tuple)):
            weights = list(file_or_weights)
        else:
            weights = list(mx.load(str(file_or_weights)).items())
        if strict:
            new = dict(weights)
            current = dict(tree_flatten(self.parameters()))
            extras = new.keys() - current.keys()
            if extras:
                raise ValueError(f"Received parameters not in model: {' '.join(sorted(extras))}.")
            missing = current.keys() - new.keys()
            if missing:
                raise ValueError(f"Missing parameters: {' '.join(sorted(missing))}.")
            for name, value in current.items():
                if not _is_array(new[name]):
                    raise ValueError(f"Expected mx.array but received {type(new[name])} for parameter {name}")
                if new[name].shape != value.shape:
                    raise ValueError(f"Expected shape {value.shape} but received shape "
                                     f"{new[name].shape} for parameter {name}")
        if weights:
            self.update(tree_unflatten(weights), strict=False)
        return self

    def save_weights(self, file):
        """Writes the parameters to a .safetensors or .npz file (by extension)."""
        file = str(file)
        flat = dict(tree_flatten(self.parameters()))
        if file.endswith(".npz"):
            mx.savez(file, **flat)
        elif file.endswith(".safetensors"):
            mx.save_safetensors(file, flat)
        else:
            raise ValueError(f"save_weights: unsupported file extension in '{file}' "
                             "(use .npz or .safetensors)")


def _unwrap(module, key, value, filter_fn, map_fn, is_leaf_fn):
    if is_leaf_fn(module, key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {k: _unwrap(value, k, v, filter_fn, map_fn, is_leaf_fn)
                for k, v in value.items() if filter_fn(value, k, v)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            path = f"{key}.{k}"
            out[k] = _unwrap(module, path, v, filter_fn, map_fn, is_leaf_fn) \
                if filter_fn(module, path, v) else {}
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            path = f"{key}.{i}"
            out.append(_unwrap(module, path, v, filter_fn, map_fn, is_leaf_fn)
                       if filter_fn(module, path, v) else {})
        return out
    raise RuntimeError("Unexpected leaf found while traversing the module")


def _update_parameters(dst, src, strict):
    if isinstance(src, dict):
        items = src.items()
    elif isinstance(src, (list, tuple)):
        items = enumerate(src)
    else:
        raise ValueError(f"update: expected a dict or list of parameters, got {type(src).__name__}")
    for key, new in items:
        if isinstance(dst, dict):
            present = key in dst
        else:
            present = isinstance(key, int) and key < len(dst)
        if not present:
            if strict:
                raise ValueError(f'Module does not have parameter named "{key}".')
            continue
        current = dst[key]
        if _is_array(current):
            if strict and not _is_array(new):
                raise ValueError(f"Received invalid type: {type(new).__name__}.")
            dst[key] = new  # any shape, as MLX's (sharding cuts them; load_weights checks)
        elif isinstance(current, (dict, list)):
            _update_parameters(current, new, strict)
        elif strict:
            raise ValueError(f"Received invalid type: {type(new).__name__}.")


def _update_modules(dst, src, strict):
    items = src.items() if isinstance(src, dict) else enumerate(src)
    for key, new in items:
        present = key in dst if isinstance(dst, dict) else (isinstance(key, int) and key < len(dst))
        if not present:
            if strict:
                raise ValueError(f'Module does not have sub-module named "{key}".')
            continue
        current = dst[key]
        if isinstance(current, Module) and isinstance(new, Module):
            dst[key] = new
        elif isinstance(current, (dict, list)) and isinstance(new, (dict, list)) \
                and not isinstance(new, Module):
            _update_modules(current, new, strict)
        elif strict and not (isinstance(new, dict) and not new):
            raise ValueError(f"Received invalid type: {type(new).__name__}.")
