"""ImageDecoder (hetero_explore/image_decoder.py): tiny images encoded with Pillow here, decoded by
the CPU provider through the node runner (a data-dependent output shape), compared with Pillow's
own decode and onnx's reference; hostile bytes (garbage, truncated, a decompression-bomb header,
a format outside the specification) give a typed error naming the node."""

import io

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

PIL = pytest.importorskip("PIL")  # the [image] extra
from PIL import Image  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.kernels.host import image_decoder  # noqa: E402
from hetero_explore.ir.errors import ExecutionError  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402
from hetero_explore.execution.runtime import run_graph  # noqa: E402

CPU = NumbaCPUProvider()


def _model(n_bytes, pixel_format="RGB"):
    node = h.make_node("ImageDecoder", ["data"], ["out"], name="dec", pixel_format=pixel_format)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("data", T.UINT8, [n_bytes])],
                     [h.make_tensor_value_info("out", T.UINT8, ["h", "w", "c"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    m.ir_version = 9
    return m


def _decode(encoded: bytes, pixel_format="RGB"):
    data = np.frombuffer(encoded, np.uint8).copy()
    g = he.load_model(_model(data.size, pixel_format), fold_constants=False, optimize=False)
    return run_graph(g, CPU, {"data": data})["out"]


def _image(mode="RGB", size=(7, 5), seed=0):
    rng = np.random.default_rng(seed)
    w, hh = size
    if mode == "L":
        return Image.fromarray(rng.integers(0, 256, (hh, w), dtype=np.uint8), "L")
    ch = 4 if mode == "RGBA" else 3
    return Image.fromarray(rng.integers(0, 256, (hh, w, ch), dtype=np.uint8), mode)


def _encode(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


LOSSLESS = [("PNG", {}), ("BMP", {}), ("TIFF", {}), ("PPM", {}), ("WEBP", {"lossless": True})]
LOSSY = [("JPEG", {"quality": 90}), ("JPEG2000", {})]


@pytest.mark.parametrize("fmt,kw", LOSSLESS, ids=[f for f, _ in LOSSLESS])
def test_lossless_formats_round_trip(fmt, kw):
    img = _image()
    got = _decode(_encode(img, fmt, **kw))
    assert got.dtype == np.uint8 and got.shape == (5, 7, 3)
    assert np.array_equal(got, np.asarray(img))


@pytest.mark.parametrize("fmt,kw", LOSSLESS + LOSSY, ids=[f for f, _ in LOSSLESS + LOSSY])
@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_matches_pillow_and_onnx_reference(fmt, kw, pixel_format):
    from onnx.reference import ReferenceEvaluator
    enc = _encode(_image(size=(6, 4), seed=1), fmt, **kw)
    got = _decode(enc, pixel_format)
    pil = Image.open(io.BytesIO(enc))
    want = {"RGB": np.asarray(pil.convert("RGB")), "BGR": np.asarray(pil.convert("RGB"))[:, :, ::-1],
            "Grayscale": np.asarray(pil.convert("L"))[:, :, None]}[pixel_format]
    assert got.shape == want.shape and np.array_equal(got, want)
    ref = ReferenceEvaluator(_model(len(enc), pixel_format)).run(None, {"data": np.frombuffer(enc, np.uint8)})[0]
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("mode", ["RGBA", "L"])
def test_other_modes_convert_to_three_channels(mode):
    """An RGBA PNG or a grayscale PNG decoded as RGB gives three channels (the specification's
    layout; onnx's reference would return 4 or 2-D here)."""
    img = _image(mode)
    got = _decode(_encode(img, "PNG"))
    assert np.array_equal(got, np.asarray(img.convert("RGB")))
    gray = _decode(_encode(img, "PNG"), "Grayscale")
    assert np.array_equal(gray[:, :, 0], np.asarray(img.convert("L")))


def test_output_shape_follows_the_data():
    """One loaded graph (the byte count bound), two images of different sizes: each output has its
    own image's shape."""
    a, b = _encode(_image(size=(3, 2)), "BMP"), _encode(_image(size=(2, 3)), "BMP")
    assert len(a) == len(b)
    g = he.load_model(_model(len(a)), fold_constants=False, optimize=False)
    for enc, shape in ((a, (2, 3, 3)), (b, (3, 2, 3))):
        assert run_graph(g, CPU, {"data": np.frombuffer(enc, np.uint8).copy()})["out"].shape == shape


def _hostile(encoded):
    with pytest.raises(ExecutionError, match="'dec'.*ImageDecoder|ImageDecoder.*'dec'|dec") as e:
        _decode(encoded)
    return str(e.value)


def test_garbage_bytes_are_a_typed_error():
    msg = _hostile(bytes(range(200)))
    assert "not an image" in msg


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "BMP"])
def test_truncated_image_is_a_typed_error(fmt):
    enc = _encode(_image(size=(32, 32), seed=3), fmt)
    _hostile(enc[: len(enc) // 2])


def test_decompression_bomb_header_is_refused_before_decoding(monkeypatch):
    """A header that claims more pixels than MAX_PIXELS is refused from the header (nothing is
    decoded); a tiny limit makes a normal file such a case."""
    enc = _encode(_image(size=(40, 30)), "PNG")
    monkeypatch.setattr(image_decoder, "MAX_PIXELS", 100)
    msg = _hostile(enc)
    assert "MAX_PIXELS" in msg and "1200" in msg


def test_huge_png_header_is_refused():
    """A hand-made PNG whose IHDR claims 100000 x 100000 pixels (10^10: Pillow's own bomb check or
    ours) with no pixel data: refused, never decoded."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
           + chunk(b"IEND", b""))
    msg = _hostile(png)
    assert "too large" in msg or "MAX_PIXELS" in msg


def test_format_outside_the_specification_is_not_tried():
    """GIF is a Pillow format but not one of ImageDecoder's: refused, not decoded."""
    enc = _encode(_image().convert("P"), "GIF")
    assert "not an image in a supported format" in _hostile(enc)


def test_declined_without_pillow(monkeypatch):
    from hetero_explore.ir.graph import Node
    from hetero_explore.ir.context import KernelContext
    monkeypatch.setattr(image_decoder, "_pil", lambda: None)
    node = Node(0, h.make_node("ImageDecoder", ["data"], ["out"], name="dec"), 20)
    ctx = KernelContext(node, 20, [(10,)], [np.dtype(np.uint8)], [None], [np.dtype(np.uint8)])
    why = image_decoder._check(ctx, "cpu")
    assert why and "Pillow" in why and "image" in why


def test_bad_pixel_format_is_declined():
    from hetero_explore.ir.graph import Node
    from hetero_explore.ir.context import KernelContext
    node = Node(0, h.make_node("ImageDecoder", ["data"], ["out"], name="dec", pixel_format="CMYK"), 20)
    ctx = KernelContext(node, 20, [(10,)], [np.dtype(np.uint8)], [None], [np.dtype(np.uint8)])
    assert "pixel_format" in image_decoder._check(ctx, "cpu")
