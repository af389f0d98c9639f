"""Reading a model: bytes, paths or a ModelProto; tensor sizes checked against their data before
anything of that size is read; external data only from regular files inside the model's folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..ir.errors import InvalidModelError, ModelLoadError
from .options import MAX_ELEMENTS
from . import ort_schemas


_PACKED_BITS = {getattr(TensorProto, n): b for n, b in
                (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2)) if hasattr(TensorProto, n)}


def _short(text: str, limit: int = 120) -> str:
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]} ({len(text)} characters)"


# -- reading -----------------------------------------------------------------------------
def _parse(data: bytes, what: str, fmt: str | None = None) -> onnx.ModelProto:
    if not data:
        raise ModelLoadError(f"{what} is empty (0 bytes); it is not an ONNX model")
    try:
        m = onnx.load_model_from_string(data, format=fmt) if fmt else onnx.load_model_from_string(data)
    except MemoryError:
        raise
    except Exception as e:
        raise ModelLoadError(f"{what} is not a serialized ONNX model: {e}") from e
    if not m.HasField("graph"):
        raise ModelLoadError(f"{what} parses but holds no ONNX graph; it is not an ONNX model "
                             f"(or an empty one)")
    return m


def _format_of(path: Path) -> str | None:
    ext = path.suffix.lower()
    return {".onnxtxt": "textproto", ".textproto": "textproto", ".json": "json"}.get(ext)


def _read_path(path: Path) -> bytes:
    shown = _short(repr(str(path)))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelLoadError(f"model file not found: {shown}") from None
    except OSError as e:
        raise ModelLoadError(f"cannot open model path {shown}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelLoadError(f"{shown} is a directory; pass the .onnx file inside it")
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(f"{shown} is not a regular file (a FIFO, device or socket); "
                             "load ONNX models from regular files")
    try:
        # O_NONBLOCK: never block on a FIFO swapped in after the stat; fstat re-checks
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ModelLoadError(f"cannot open model file {shown}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"{shown} is not a regular file; load ONNX models from regular files")
        return f.read(st.st_size)


def read_model(model) -> tuple[onnx.ModelProto, Path | None]:
    """The model as a fresh ``ModelProto`` and the directory its external data lives in."""
    ort_schemas.register()   # onnxruntime's default-domain ops that onnx lacks (SimplifiedLayerNormalization)
    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        if not m.HasField("graph"):
            raise ModelLoadError("this ModelProto holds no graph; it is not a usable ONNX model")
        return m, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(bytes(model), "these bytes"), None
    if isinstance(model, (str, os.PathLike)):
        raw = os.fspath(model)
        nul = raw.find("\x00" if isinstance(raw, str) else b"\x00")
        if nul >= 0:
            raise ModelLoadError(f"model path {_short(repr(raw))} holds a NUL byte (\\x00) at position {nul}; "
                                 "a file path cannot contain one: pass the path without it")
        path = Path(os.fsdecode(raw))
        data = _read_path(path)
        return _parse(data, _short(repr(str(path))), _format_of(path)), path.parent
    raise ModelLoadError(f"cannot load a model from {type(model).__name__}; "
                         "pass a path, an onnx.ModelProto or the serialized bytes")


# -- tensors and external data --------------------------------------------------------------
def _numel(dims, what: str) -> int:
    n = 1
    for d in dims:
        d = int(d)
        if d < 0:
            raise InvalidModelError(f"{what} has a negative dim in {list(dims)}")
        n *= d
    if n > MAX_ELEMENTS:
        raise InvalidModelError(f"{what} declares dims {list(dims)}: {n} elements, over the bound of "
                                f"{MAX_ELEMENTS}; the model is corrupt or hostile")
    return n


def _expected_bytes(t: TensorProto, n: int) -> int | None:
    """Bytes of raw data a dense tensor of ``n`` elements takes (None for strings)."""
    if t.data_type == TensorProto.STRING:
        return None
    if t.data_type in _PACKED_BITS:
        return (n * _PACKED_BITS[t.data_type] + 7) // 8
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize


def _typed_count(t: TensorProto, n: int) -> tuple[str, int]:
    """(field, number of entries that field must hold) for a tensor without raw data."""
    field = helper.tensor_dtype_to_field(t.data_type)
    if t.data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
        return field, 2 * n
    if t.data_type in _PACKED_BITS:
        # packed 4-bit (2-bit) values: one packed byte per int32_data entry
        return field, (n * _PACKED_BITS[t.data_type] + 7) // 8
    return field, n


def check_tensor(t: TensorProto, what: str) -> None:
    """Check that a tensor's data holds exactly what its dims declare (before reading it)."""
    valid = set(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
    if t.data_type not in valid:
        raise InvalidModelError(f"{what} has an invalid data type {t.data_type}")
    n = _numel(t.dims, what)
    if t.data_location == TensorProto.EXTERNAL:
        return  # checked against its file in _load_external_data, and again once read
    if t.HasField("raw_data") or t.raw_data:
        want = _expected_bytes(t, n)
        if want is None:
            raise InvalidModelError(f"{what} is a string tensor with raw_data; strings go in string_data")
        if len(t.raw_data) != want:
            raise InvalidModelError(f"{what} declares dims {list(t.dims)} ({n} elements, {want} bytes) but "
                                    f"holds {len(t.raw_data)} bytes of data; the model is corrupt")
        return
    try:
        field, want = _typed_count(t, n)
    except Exception as e:
        raise InvalidModelError(f"{what} has data type {t.data_type} whose storage is unknown: {e}") from e
    have = len(getattr(t, field))
    if have != want:
        raise InvalidModelError(f"{what} declares dims {list(t.dims)} ({n} elements) but its {field} holds "
                                f"{have} entries (expected {want}); the model is corrupt")


def _tensors_to_check(m: onnx.ModelProto):
    g = m.graph
    for t in g.initializer:
        yield t, f"initializer {t.name!r}"
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t, f"tensor attribute {a.name!r} of node {n.name or n.op_type!r}"
            elif a.type == onnx.AttributeProto.TENSORS:
                for i, t in enumerate(a.tensors):
                    yield t, f"tensor {i} of attribute {a.name!r} of node {n.name or n.op_type!r}"


def _external_location(t: TensorProto) -> dict:
    return {e.key: e.value for e in t.external_data}


def _inside(root: Path, loc: str, where: str) -> Path:
    """The file ``loc`` names, relative to the model's folder ``root`` (a resolved path), when it
    resolves inside that folder through no symbolic link; else a typed error.

    The resolved paths are compared, not the spellings: ``sub/../w.bin`` is ``w.bin``, while
    ``sub/../../w.bin``, an absolute path or a link anywhere on the way is refused."""
    if os.path.isabs(loc) or Path(loc).drive:
        raise ModelLoadError(f"{where} outside the model's directory (an absolute path); refusing to read it: "
                             "write it relative to the model's folder")
    target = Path(os.path.normpath(root / loc))
    if target != root and root not in target.parents:
        raise ModelLoadError(f"{where} outside the model's directory (its '..' lead out of it, to "
                             f"{_short(repr(str(target)))}); refusing to read it")
    # every folder and file on the written way must be what it is called, not a link: a link
    # could lead out and back, or out altogether
    step = root
    for part in Path(loc).parts:
        step = step.parent if part == ".." else (step if part == "." else step / part)
        if part not in ("..", ".") and os.path.islink(step):
            raise ModelLoadError(f"{where} through a symbolic link ({_short(repr(str(step)))}); refusing to "
                                 "read it: copy the data file next to the model")
    if os.path.realpath(target) != str(target):
        raise ModelLoadError(f"{where} through a symbolic link (or outside the model's directory); "
                             "refusing to read it: copy the data file next to the model")
    return target


def _load_external_data(m: onnx.ModelProto, base: Path | None) -> None:
    """Resolve external tensor data, only from regular files inside the model's own directory
    (no absolute paths, no ``..``, no symlinks, no hard links, offsets within the file)."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    tensors = [t for t in _get_all_tensors(m) if uses_external_data(t)]
    if not tensors:
        return
    if base is None:
        raise ModelLoadError("the model keeps tensors in external data files; load it from its "
                             "path so that they can be found next to it")
    root = Path(os.path.realpath(base))
    for t in tensors:
        info = _external_location(t)
        loc = info.get("location", "")
        where = f"tensor {t.name!r} points at external data {_short(repr(loc))}"
        if not loc:
            raise InvalidModelError(f"tensor {t.name!r} uses external data but names no location")
        if "\x00" in loc:
            raise InvalidModelError(f"{where}, whose location holds a NUL byte (\\x00) at position "
                                    f"{loc.index(chr(0))}; a file name cannot contain one: write the data "
                                    "file's name relative to the model's folder without it")
        lexical = _inside(root, loc, where)
        try:
            st = os.lstat(lexical)
        except FileNotFoundError:
            raise ModelLoadError(f"external data file {_short(repr(loc))} for tensor {t.name!r} is missing") \
                from None
        except OSError as e:
            raise ModelLoadError(f"{where} that cannot be read: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"{where}, which is not a regular file (a FIFO, device, socket or "
                                 "directory); refusing to read it")
        if st.st_nlink > 1:
            raise ModelLoadError(f"{where}, a file with {st.st_nlink} hard links; refusing to read it "
                                 "(a hard link can reach outside the model's directory): copy it instead")
        try:
            offset = int(info.get("offset", 0) or 0)
            length = int(info["length"]) if info.get("length") not in (None, "") else None
        except ValueError:
            raise InvalidModelError(f"{where} with a non-integer offset or length: {info}") from None
        n = _numel(t.dims, f"tensor {t.name!r}")
        want = _expected_bytes(t, n)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidModelError(f"{where} with a negative offset or length ({offset}, {length})")
        if offset > st.st_size or (length is not None and offset + length > st.st_size):
            raise InvalidModelError(f"{where} at offset {offset} length {length}, beyond the end of the "
                                    f"{st.st_size}-byte file; the model or its data is corrupt")
        avail = st.st_size - offset if length is None else length
        if want is not None and avail != want:
            raise InvalidModelError(f"tensor {t.name!r} declares dims {list(t.dims)} ({want} bytes) but its "
                                    f"external data holds {avail} bytes; the model or its data is corrupt")
        # onnx reads the file the checks above were made on: the resolved name, inside the folder
        for e in t.external_data:
            if e.key == "location":
                e.value = lexical.relative_to(root).as_posix()
    try:
        onnx.load_external_data_for_model(m, str(root))
    except MemoryError:
        raise
    except Exception as e:
        raise ModelLoadError(f"could not read external data: {e}") from e
