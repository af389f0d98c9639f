"""ImageDecoder (opset 20) on the CPU provider: encoded bytes → uint8 HWC pixels, with Pillow.

A host op with no numba kernel (kept outside the kernel directory, so its edits do
not change the kernel-source hash). The input is a 1-D uint8 tensor holding one
encoded image; the output is ``(H, W, 3)`` for ``pixel_format`` RGB or BGR and
``(H, W, 1)`` for Grayscale. Its size depends on the data: the run-time shape
function (``OpDef.infer``, as NonZero's) reads only the image header
(``PIL.Image.open`` is lazy), the node runner allocates, and the build decodes.

Decoding follows onnx's reference (``onnx/reference/ops/op_image_decoder.py``,
Pillow as well): RGB is ``np.array(img)``, BGR its channels reversed, Grayscale
``img.convert("L")``. Where the reference would return another channel count
(an RGBA PNG, a palette or grayscale file decoded as RGB) this converts to RGB
first (``img.convert("RGB")``), as the operator's specification asks for three
channels; EXIF orientation is not applied (as the reference).

Hostile bytes: only the formats the specification names are tried (JPEG,
JPEG 2000, PNG, BMP, TIFF, WebP, PNM: Pillow's ``formats=`` argument, so no
other plug-in, e.g. EPS through Ghostscript, is reached); an image larger than
:data:`MAX_PIXELS` is refused from its header, before any pixel is decoded (a
decompression bomb); undecodable or truncated bytes are an
:class:`~hetero_explore.ir.errors.ExecutionError` naming the node. Without Pillow
(the ``image`` extra) the op is declined with the install hint.
"""

from __future__ import annotations

import io
import warnings

import numpy as np

from ...ir.errors import ExecutionError
from ..opdef import OpList

OPS = OpList()

#: the largest image (width * height) decoded: 2**26 pixels (192 MiB as RGB); larger headers are refused
MAX_PIXELS = 1 << 26
#: Pillow's format ids of the encodings the ONNX specification lists
FORMATS = ("JPEG", "JPEG2000", "PNG", "BMP", "TIFF", "WEBP", "PPM")
_PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")


def _pil():
    try:
        import PIL.Image
    except ImportError:
        return None
    return PIL.Image


def _where(ctx) -> str:
    return f"node {ctx.node.name!r} ({ctx.node.op_type})"


def _pixel_format(ctx) -> str:
    v = ctx.attrs.get("pixel_format", "RGB")
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _open(ctx, data):
    """The lazily opened image (header read, pixels not decoded), after the size check."""
    Image = _pil()
    where = _where(ctx)
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise ExecutionError(f"{where}: the encoded stream must be a 1-D uint8 tensor, got {data.dtype} "
                             f"{data.shape}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data.tobytes()), formats=FORMATS)
    except Image.DecompressionBombError as e:
        raise ExecutionError(f"{where}: the image is too large to decode ({e})") from e
    except Exception as e:  # UnidentifiedImageError, truncated headers, plug-in errors
        raise ExecutionError(f"{where}: the {data.size} bytes are not an image in a supported format "
                             f"({', '.join(FORMATS)}): {type(e).__name__}: {e}") from e
    w, h = img.size
    if w * h > MAX_PIXELS:
        img.close()
        raise ExecutionError(f"{where}: the image is {w} x {h} = {w * h} pixels, more than the "
                             f"{MAX_PIXELS} hetero_explore.kernels.host.image_decoder.MAX_PIXELS allows (a "
                             "decompression bomb?); raise MAX_PIXELS to decode it")
    return img


def _channels(ctx) -> int:
    return 1 if _pixel_format(ctx) == "Grayscale" else 3


def decode(ctx, data) -> np.ndarray:
    """The decoded ``(H, W, C)`` uint8 image of the encoded bytes ``data``."""
    img = _open(ctx, data)
    fmt = _pixel_format(ctx)
    try:
        with img, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if fmt == "Grayscale":
                out = np.asarray(img.convert("L"))[:, :, None]
            else:
                rgb = img if img.mode == "RGB" else img.convert("RGB")
                out = np.asarray(rgb)
                if fmt == "BGR":
                    out = out[:, :, ::-1]
    except Exception as e:  # truncated or corrupt pixel data
        raise ExecutionError(f"{_where(ctx)}: decoding the image failed: {type(e).__name__}: {e}") from e
    return np.ascontiguousarray(out, np.uint8)


def _infer(ctx, arrays):
    img = _open(ctx, arrays[0])
    w, h = img.size
    img.close()
    return [((h, w, _channels(ctx)), np.dtype(np.uint8))]


def _check(ctx, target):
    if _pil() is None:
        return ("ImageDecoder needs Pillow: pip install 'hetero_explore[image]' (or pip install "
                "'Pillow>=10')")
    fmt = _pixel_format(ctx)
    if fmt not in _PIXEL_FORMATS:
        return f"ImageDecoder: pixel_format must be one of {', '.join(_PIXEL_FORMATS)}, got {fmt!r}"
    return None


def _build(ctx, target):
    where = _where(ctx)

    def run(inputs, outputs):
        img = decode(ctx, inputs[0])
        out = outputs[0]
        if tuple(out.shape) != img.shape:
            raise ExecutionError(f"{where}: the decoded image is {img.shape}, the output was allocated "
                                 f"{tuple(out.shape)} from its header")
        out[...] = img

    return run


OPS.add("ImageDecoder", _build, since=20, until=21, dtypes=("uint8",), targets=("cpu",), check=_check,
        shape_inputs=(0,), infer=_infer, data_dependent_output=True,
        note="Pillow decode (JPEG, JPEG 2000, PNG, BMP, TIFF, WebP, PNM) to uint8 HWC RGB/BGR/Grayscale; "
             f"images above {MAX_PIXELS} pixels refused; host only; declined without Pillow")
