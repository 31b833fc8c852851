"""Reads PyTorch zip checkpoints (pytorch_model.bin) into numpy, without torch and
without running code: a security boundary.

A .bin file is a zip archive holding a pickle (`<name>/data.pkl`) and the raw
bytes of every tensor storage (`<name>/data/<key>`). Unpickling an arbitrary
pickle can run arbitrary code, because a pickle names callables (its GLOBAL
and STACK_GLOBAL opcodes, INST and OBJ, the extension registry) that the
loader imports and calls. Every one of those routes goes through
`Unpickler.find_class`, so `_RestrictedUnpickler` answers it from a fixed table
and imports nothing:

allowed   collections.OrderedDict; torch._utils._rebuild_tensor_v2,
          _rebuild_parameter and _rebuild_parameter_with_state (rebuilt here
          as numpy copies, never as torch objects); the torch.*Storage
          element types (float, double, half, bfloat16, long, int, short,
          char, byte, bool); persistent ids of the form ('storage', type,
          key, location, numel) naming a member of the same archive.
refused   every other global (os.system, builtins.eval, ...), any other
          persistent id, storages the archive lacks, tensor views that reach
          outside their storage (checked before numpy's as_strided reads
          memory), a result that is not a dict of name -> array, and the
          legacy non-zip format (which cannot be read this way).

A refusal is one InputError naming the file. bfloat16 storages widen
exactly to float32.
"""

import collections
import io
import os
import pickle
import zipfile

import numpy as np

from bert_toolkit.errors import InputError


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _one_line(error):
    return " ".join(str(error).split())


class _StorageType(object):
    """What a whitelisted `torch.XxxStorage` global unpickles to: its element type."""

    __slots__ = ("name", "dtype_code", "is_bfloat16")

    def __init__(self, name, dtype_code, is_bfloat16=False):
        self.name = name
        self.dtype_code = dtype_code
        self.is_bfloat16 = is_bfloat16


class _Storage(object):
    """A storage read from the archive: a flat array of its elements (bf16 as uint16)."""

    __slots__ = ("array", "is_bfloat16")

    def __init__(self, array, is_bfloat16):
        self.array = array
        self.is_bfloat16 = is_bfloat16


# torch storage class -> numpy type of its elements. bfloat16 has no numpy
# type: its raw 16-bit patterns are read as uint16 and widened afterwards.
_STORAGE_TYPES = {
    "FloatStorage": _StorageType("FloatStorage", "f4"),
    "DoubleStorage": _StorageType("DoubleStorage", "f8"),
    "HalfStorage": _StorageType("HalfStorage", "f2"),
    "BFloat16Storage": _StorageType("BFloat16Storage", "u2", is_bfloat16=True),
    "LongStorage": _StorageType("LongStorage", "i8"),
    "IntStorage": _StorageType("IntStorage", "i4"),
    "ShortStorage": _StorageType("ShortStorage", "i2"),
    "CharStorage": _StorageType("CharStorage", "i1"),
    "ByteStorage": _StorageType("ByteStorage", "u1"),
    "BoolStorage": _StorageType("BoolStorage", "?"),
}


def bfloat16_bits_to_float32(bits):
    """uint16 bf16 bit patterns (any shape) -> float32 of the same shape, exactly.

    bf16 is the top half of a float32, so shifting the bits up 16 places is
    the whole conversion.
    """
    return (bits.astype(np.uint32) << 16).view(np.float32)


def strided_view_copy(flat, offset, shape, strides, source="storage"):
    """Materialises torch's view (offset, shape, strides in elements) of `flat`.

    flat: 1-D array of the storage. Returns a new C-contiguous array of
    `shape`. Every element the view could touch is checked to lie inside the
    storage first, because as_strided itself reads whatever memory it is told.
    """
    shape = tuple(shape)
    strides = tuple(strides)
    if len(shape) != len(strides) or not all(_is_int(v) and v >= 0 for v in shape + strides):
        raise InputError("%s: bad tensor layout, size %r stride %r" % (source, shape, strides))
    if not _is_int(offset) or offset < 0:
        raise InputError("%s: bad storage offset %r" % (source, offset))
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if numel == 0:
        return np.zeros(shape, flat.dtype)
    last = offset + sum((size - 1) * stride for size, stride in zip(shape, strides))
    if last >= flat.size or numel > flat.size:
        raise InputError("%s: tensor of size %r stride %r offset %d does not fit its storage "
                         "of %d elements" % (source, shape, strides, offset, flat.size))
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], shape=shape, strides=[s * flat.itemsize for s in strides],
        writeable=False)
    return np.array(view, order="C")


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickles a torch state dict into numpy arrays, refusing every other global.

    `find_class` is the only way a pickle can reach code (GLOBAL,
    STACK_GLOBAL, INST, OBJ and the extension registry all go through it), so
    answering it from a fixed table, and never importing anything, is what
    keeps a hostile file from running code.
    """

    def __init__(self, data_pkl, archive, prefix, source, big_endian):
        super().__init__(io.BytesIO(data_pkl))
        self._archive = archive
        self._prefix = prefix
        self._source = source
        self._byte_order = ">" if big_endian else "<"
        self._storages = {}
        self._globals = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): self._rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): self._rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): self._rebuild_parameter,
        }
        for name, storage_type in _STORAGE_TYPES.items():
            self._globals[("torch", name)] = storage_type

    def find_class(self, module, name):
        builder = self._globals.get((module, name))
        if builder is None:
            raise InputError("%s: forbidden global %s.%s in the pickle (a weights file may "
                             "only hold tensors); refusing to load it"
                             % (self._source, module, name))
        return builder

    def persistent_load(self, pid):
        """('storage', storage_type, key, location, numel) -> _Storage of archive data/<key>."""
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)):
            raise InputError("%s: unexpected persistent id %r in the pickle"
                             % (self._source, pid[:3] if isinstance(pid, tuple) else pid))
        storage_type, key = pid[1], pid[2]
        if key not in self._storages:
            member = "%s/data/%s" % (self._prefix, key)
            try:
                raw = self._archive.read(member)
            except KeyError:
                raise InputError("%s: the pickle refers to %s, which the archive lacks"
                                 % (self._source, member))
            dtype = np.dtype(storage_type.dtype_code).newbyteorder(self._byte_order)
            if len(raw) % dtype.itemsize:
                raise InputError("%s: %s holds %d bytes, not a whole number of %s elements"
                                 % (self._source, member, len(raw), storage_type.name))
            flat = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
            self._storages[key] = _Storage(flat, storage_type.is_bfloat16)
        return self._storages[key]

    def _rebuild_tensor(self, storage, storage_offset, size, stride, requires_grad=False,
                        backward_hooks=None, metadata=None):
        """torch._utils._rebuild_tensor_v2 -> np.ndarray copy of the strided view."""
        del requires_grad, backward_hooks, metadata  # meaningless for numpy
        if not isinstance(storage, _Storage):
            raise InputError("%s: a tensor in the pickle has no storage" % self._source)
        array = strided_view_copy(storage.array, storage_offset, size, stride, self._source)
        if storage.is_bfloat16:
            array = bfloat16_bits_to_float32(array)
        return array

    def _rebuild_parameter(self, data, requires_grad=False, backward_hooks=None, state=None):
        """torch._utils._rebuild_parameter(_with_state): a Parameter is just its tensor."""
        del requires_grad, backward_hooks, state
        return data


def _archive_prefix(archive, source):
    """The top folder of a torch zip archive: the one holding data.pkl."""
    candidates = [n[:-len("/data.pkl")] for n in archive.namelist()
                  if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(candidates) != 1:
        raise InputError("%s: not a PyTorch checkpoint (expected one <name>/data.pkl "
                         "in the zip, found %d)" % (source, len(candidates)))
    return candidates[0]


def read_pytorch_bin(path):
    """Reads a torch>=1.6 zip checkpoint -> OrderedDict name -> np.ndarray, torch-free.

    Storages keep their dtype (float32, float16, int64, ...) except bfloat16,
    which widens to float32. The legacy (non-zip) format is refused.
    """
    if not os.path.isfile(path):
        raise InputError("%s: file not found" % path)
    if not zipfile.is_zipfile(path):
        raise InputError("%s: not the zip format of torch >= 1.6 (legacy PyTorch files "
                         "cannot be read safely); re-save it as safetensors" % path)
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = _archive_prefix(archive, path)
            names = set(archive.namelist())
            byte_order = b"little"
            if prefix + "/byteorder" in names:
                byte_order = archive.read(prefix + "/byteorder").strip()
            if byte_order not in (b"little", b"big"):
                raise InputError("%s: unknown byte order %r" % (path, byte_order))
            unpickler = _RestrictedUnpickler(archive.read(prefix + "/data.pkl"), archive,
                                             prefix, path, byte_order == b"big")
            state = unpickler.load()
    except InputError:
        raise
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, AttributeError,
            IndexError, KeyError, TypeError, ValueError, OSError, RecursionError) as e:
        raise InputError("%s: not a readable PyTorch checkpoint (%s: %s)"
                         % (path, type(e).__name__, _one_line(e)))
    if not isinstance(state, dict):
        raise InputError("%s: expected a state dict (name -> tensor), got %s"
                         % (path, type(state).__name__))
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, np.ndarray):
            raise InputError("%s: entry %r is not a tensor; expected a plain state dict"
                             % (path, key))
    return collections.OrderedDict(state)
