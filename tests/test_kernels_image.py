"""Image / geometry kernels (kernels/image.py, and resize.py's Upsample and full Resize):
each op against onnx's ReferenceEvaluator or onnxruntime, CPU vs CUDA-simulator bitwise, and
the index checks (bad ROI batch indices raise on both targets, naming the node)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from hetero_explore.ir.errors import ExecutionError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider

from support.harness import reference as support_reference, run_both, node_model, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32


def canon(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.float32(np.nan), a).astype(a.dtype)
    return a.view(np.uint8)


def both(n, ins, opset, const=()):
    """CPU result, asserted bitwise equal to the CUDA simulator's."""
    return run_both(n, ins, opset, const)[0]


def reference(n, ins, opset, const=()):
    return support_reference(n, ins, opset, const)[0]


def onnxruntime(n, ins, opset, const=()):
    m = node_model(n, ins, opset, const)
    for o in m.graph.output:                 # onnxruntime needs typed outputs
        o.type.tensor_type.elem_type = TensorProto.FLOAT
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {name: a for i, (name, a) in enumerate(zip(n.input, ins)) if name and i not in const}
    return s.run(None, feeds)[0]


# --- GridSample --------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_gridsample_2d(mode, padding, align):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 4, 5)).astype(F)
    grid = rng.uniform(-1.4, 1.4, (2, 3, 4, 2)).astype(F)
    grid[0, 0, 0] = (-1.0, 1.0)              # corners and the centre exactly
    grid[0, 0, 1] = (0.0, 0.0)
    grid[1, 2, 3] = (3.7, -2.9)              # several reflections
    n = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs", mode=mode, padding_mode=padding,
                         align_corners=align)
    got = both(n, [x, grid], 20)
    np.testing.assert_allclose(got, reference(n, [x, grid], 20), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("align", [0, 1])
def test_gridsample_volumetric(mode, align):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 3, 4, 3)).astype(F)
    grid = rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(F)
    n = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs3", mode=mode, align_corners=align,
                         padding_mode="border")
    got = both(n, [x, grid], 20)
    np.testing.assert_allclose(got, reference(n, [x, grid], 20), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_gridsample_16_names_vs_onnxruntime(mode):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 5, 4)).astype(F)
    grid = rng.uniform(-1.1, 1.1, (1, 4, 2, 2)).astype(F)
    n = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs16", mode=mode)
    got = both(n, [x, grid], 16)
    np.testing.assert_allclose(got, onnxruntime(n, [x, grid], 16), rtol=1e-5, atol=2e-6)


def test_gridsample_16_declines_volumetric_and_new_names():
    x = np.zeros((1, 1, 2, 2, 2), F)
    g = np.zeros((1, 1, 1, 1, 3), F)
    n = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs")
    assert not supports(CPU, n, [x, g], 16)
    n = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs", mode="linear")
    assert not supports(CPU, n, [np.zeros((1, 1, 2, 2), F), np.zeros((1, 1, 1, 2), F)], 16)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_gridsample_hostile_grid(mode, padding):
    """NaN gives NaN; inf and 1e30 neither crash nor read out of bounds; same bits on both."""
    x = np.arange(12, dtype=F).reshape(1, 1, 3, 4)
    vals = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, 0.25]
    grid = np.array([[[[a, b] for b in vals] for a in vals]], F)      # (1, 7, 7, 2)
    n = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs", mode=mode, padding_mode=padding)
    got = both(n, [x, grid], 20)
    nan_in = np.isnan(grid).any(axis=-1)[None]
    assert np.array_equal(np.isnan(got), nan_in)
    finite = np.isfinite(grid).all(axis=-1)[None]
    if padding != "reflection":               # the reference's reflection of 1e30 is float noise
        ref = reference(n, [x, grid[:, 3:, 3:]], 20)
        np.testing.assert_allclose(got[:, :, 3:, 3:], ref, rtol=1e-5, atol=1e-5)
    assert np.all(np.isfinite(got[finite]))


# --- RoiAlign ----------------------------------------------------------------------------
def _rois():
    return np.array([[0.0, 0.0, 8.0, 7.0], [1.3, 2.2, 5.9, 6.1], [-3.0, -2.0, 4.0, 3.0],
                     [6.5, 5.0, 12.0, 11.0], [2.0, 2.0, 2.2, 2.1], [4.0, 1.0, 1.0, 4.0]], F)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling", [0, 2])
def test_roialign(mode, ctm, sampling):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 8, 9)).astype(F)
    rois = _rois()
    bidx = np.array([0, 1, 1, 0, 1, 0], np.int64)
    n = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="roi", mode=mode,
                         coordinate_transformation_mode=ctm, output_height=3, output_width=4,
                         sampling_ratio=sampling, spatial_scale=0.9)
    got = both(n, [x, rois, bidx], 16)
    np.testing.assert_allclose(got, reference(n, [x, rois, bidx], 16), rtol=1e-5, atol=2e-6)


def test_roialign_10_vs_onnxruntime():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 6, 6)).astype(F)
    rois = _rois()[:4]
    bidx = np.zeros(4, np.int64)
    n = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="roi10", output_height=2,
                         output_width=2, sampling_ratio=2, spatial_scale=0.5)
    got = both(n, [x, rois, bidx], 10)
    np.testing.assert_allclose(got, onnxruntime(n, [x, rois, bidx], 10), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
@pytest.mark.parametrize("bad", [2, -1, 1 << 40])
def test_roialign_bad_batch_index(provider, bad):
    x = np.ones((2, 1, 4, 4), F)
    rois = _rois()[:3]
    bidx = np.array([0, bad, 1], np.int64)
    n = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="roi_bad", output_height=2,
                         output_width=2)
    with pytest.raises(ExecutionError, match=rf"roi_bad.*batch index {bad} is out of range"):
        run_node(provider, n, [x, rois, bidx], opset=16)


def test_roialign_hostile_rois():
    """NaN / inf / huge ROIs neither crash nor read out of bounds; same bits on both targets."""
    x = np.arange(32, dtype=F).reshape(2, 1, 4, 4)
    rois = np.array([[np.nan, 0, 2, 2], [0, 0, np.inf, 2], [-1e30, -1e30, 1e30, 1e30], [0, 0, 3, 3]], F)
    bidx = np.array([0, 1, 0, 1], np.int64)
    n = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="roi_h", output_height=2,
                         output_width=2, sampling_ratio=2)
    got = both(n, [x, rois, bidx], 16)
    assert np.all(np.isfinite(got[1:]))
    # the reference cannot take the NaN row (int(NaN)); the finite one against it
    np.testing.assert_allclose(got[3:], reference(n, [x, rois[3:], bidx[3:]], 16), rtol=1e-6)


# --- Upsample-7/9, Resize-10 -----------------------------------------------------------------
def test_upsample7_attribute_nearest():
    x = np.arange(6, dtype=F).reshape(1, 1, 2, 3)
    n = helper.make_node("Upsample", ["x"], ["y"], name="up7", scales=[1.0, 1.0, 2.0, 3.0])
    got = both(n, [x], 7)
    assert np.array_equal(got, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))


UP = [(1.0, 1.0, 2.0, 3.0), (1.0, 1.0, 1.5, 2.5)]
DOWN = [(1.0, 1.0, 0.5, 0.6), (1.0, 1.0, 0.6, 1.7)]


@pytest.mark.parametrize("op,opset,scales", [("Upsample", 9, s) for s in UP] +
                         [("Resize", 10, s) for s in UP + DOWN])     # Upsample: scales >= 1
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_old_resize_vs_onnxruntime(op, opset, mode, scales):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 4, 5)).astype(F)
    sc = np.array(scales, F)
    n = helper.make_node(op, ["x", "s"], ["y"], name="up", mode=mode)
    got = both(n, [x, sc], opset, const=(1,))
    np.testing.assert_allclose(got, onnxruntime(n, [x, sc], opset, const=(1,)), rtol=1e-6, atol=1e-6)


def test_upsample_declines_downsampling():
    n = helper.make_node("Upsample", ["x", "s"], ["y"], name="up", mode="nearest")
    ins = [np.zeros((1, 1, 4, 4), F), np.array([1, 1, 0.5, 2], F)]
    assert not supports(CPU, n, ins, 9, const_inputs=(1,))
    ins[1] = np.array([1, 1, 1, 2], F)
    assert supports(CPU, n, ins, 9, const_inputs=(1,))


def test_old_resize_declines_runtime_scales():
    n = helper.make_node("Resize", ["x", "s"], ["y"], name="up", mode="nearest")
    assert not supports(CPU, n, [np.zeros((1, 1, 2, 2), F), np.ones(4, F)], 10)


# --- Col2Im ------------------------------------------------------------------------------
@pytest.mark.parametrize("img,blk,attrs", [
    ((5, 5), (2, 2), {}),
    ((6, 7), (3, 2), {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}),
    ((3, 4, 5), (2, 1, 2), {"strides": [1, 2, 1]}),
])
def test_col2im(img, blk, attrs):
    r = len(img)
    pads = attrs.get("pads", [0] * 2 * r)
    st = attrs.get("strides", [1] * r)
    dl = attrs.get("dilations", [1] * r)
    nb = [(img[d] + pads[d] + pads[d + r] - dl[d] * (blk[d] - 1) - 1) // st[d] + 1 for d in range(r)]
    x = np.random.default_rng(7).standard_normal((2, 3 * int(np.prod(blk)), int(np.prod(nb)))).astype(F)
    ins = [x, np.array(img, np.int64), np.array(blk, np.int64)]
    n = helper.make_node("Col2Im", ["x", "i", "b"], ["y"], name="c2i", **attrs)
    got = both(n, ins, 18, const=(1, 2))
    np.testing.assert_allclose(got, reference(n, ins, 18, const=(1, 2)), rtol=1e-6, atol=1e-6)


# --- MaxUnpool ---------------------------------------------------------------------------
def test_maxunpool_roundtrip_with_maxpool_indices():
    x = np.random.default_rng(8).standard_normal((2, 3, 6, 4)).astype(F)
    mp = helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 2], strides=[2, 2])
    v, idx = (np.asarray(a) for a in ReferenceEvaluator(node_model(mp, [x], 13)).run(None, {"x": x}))
    n = helper.make_node("MaxUnpool", ["v", "i"], ["y"], name="mu", kernel_shape=[2, 2], strides=[2, 2])
    got = both(n, [v, idx], 11)
    np.testing.assert_array_equal(got, reference(n, [v, idx], 11))
    # with a larger output_shape: the unpooled (6, 4) block embedded at the origin
    n = helper.make_node("MaxUnpool", ["v", "i", "s"], ["y"], name="mu", kernel_shape=[2, 2], strides=[2, 2])
    ins = [v, idx, np.array([2, 3, 7, 5], np.int64)]
    # onnx's inference does not read output_shape: the shape the runner computes (``infer``)
    c, g = (run_node(p, n, ins, opset=11, const_inputs=(2,), out_shapes=[(2, 3, 7, 5)],
                     out_dtypes=[np.dtype(F)])[0] for p in (CPU, GPU))
    assert np.array_equal(canon(c), canon(g))
    np.testing.assert_array_equal(c, reference(n, ins, 11, const=(2,)))


def test_maxunpool_duplicates_last_wins():
    v = np.array([[[[1, 2], [3, 4]]]], F)
    idx = np.array([[[[0, 0], [3, 0]]]], np.int64)
    n = helper.make_node("MaxUnpool", ["v", "i"], ["y"], name="mu", kernel_shape=[2, 2], strides=[2, 2])
    got = both(n, [v, idx], 11)
    np.testing.assert_array_equal(got, reference(n, [v, idx], 11))
    assert got.reshape(-1)[0] == 4


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
@pytest.mark.parametrize("bad", [16, -1])
def test_maxunpool_bad_index(provider, bad):
    v = np.ones((1, 1, 2, 2), F)
    idx = np.array([[[[0, 5], [bad, 15]]]], np.int64)
    n = helper.make_node("MaxUnpool", ["v", "i"], ["y"], name="mu_bad", kernel_shape=[2, 2], strides=[2, 2])
    with pytest.raises(ExecutionError, match=rf"mu_bad.*index {bad} is out of range"):
        run_node(provider, n, [v, idx], opset=11)


# --- MaxRoiPool --------------------------------------------------------------------------
def test_maxroipool_vs_onnxruntime():
    x = np.random.default_rng(9).standard_normal((2, 3, 8, 7)).astype(F)
    rois = np.array([[0, 0, 0, 6, 7], [1, 1.4, 2.6, 5.5, 4.4], [1, -3, -2, 2, 3], [0, 5, 5, 20, 20],
                     [0, 4, 4, 3, 3]], F)
    n = helper.make_node("MaxRoiPool", ["x", "r"], ["y"], name="mrp", pooled_shape=[3, 2], spatial_scale=0.8)
    got = both(n, [x, rois], 1)
    np.testing.assert_array_equal(got, onnxruntime(n, [x, rois], 1))


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_maxroipool_bad_batch_index(provider):
    x = np.ones((2, 1, 4, 4), F)
    rois = np.array([[0, 0, 0, 2, 2], [2, 0, 0, 2, 2]], F)
    n = helper.make_node("MaxRoiPool", ["x", "r"], ["y"], name="mrp_bad", pooled_shape=[2, 2])
    with pytest.raises(ExecutionError, match=r"mrp_bad.*batch index 2.0 is out of range"):
        run_node(provider, n, [x, rois], opset=1)


# --- AffineGrid --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(size, align):
    r = len(size) - 2
    th = np.random.default_rng(10).standard_normal((size[0], r, r + 1)).astype(F)
    ins = [th, np.array(size, np.int64)]
    n = helper.make_node("AffineGrid", ["t", "s"], ["y"], name="ag", align_corners=align)
    got = both(n, ins, 20, const=(1,))
    np.testing.assert_allclose(got, reference(n, ins, 20, const=(1,)), rtol=1e-6, atol=1e-6)


# --- Det ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 2), (3, 4, 4), (2, 1, 5, 5), (1, 1)])
def test_det(shape):
    x = np.random.default_rng(11).standard_normal(shape).astype(F)
    if len(shape) == 3:
        x[0, 0] = 0.0                       # a zero pivot: needs a row swap
        x[1] = x[1][[1, 0, 2, 3]]
        x[2, 3] = x[2, 1]                   # singular
    n = helper.make_node("Det", ["x"], ["y"], name="det")
    got = both(n, [x], 22)
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)).astype(F), rtol=1e-5, atol=1e-6)


# --- DeformConv --------------------------------------------------------------------------
@pytest.mark.parametrize("attrs,with_bias,with_mask", [
    ({}, False, False),
    ({"pads": [1, 0, 1, 1], "strides": [2, 1], "dilations": [1, 2]}, True, True),
    ({"group": 2, "offset_group": 2}, True, False),
])
def test_deform_conv(attrs, with_bias, with_mask):
    rng = np.random.default_rng(12)
    N, C, H, W, OC, KH, KW = 1, 4, 5, 6, 4, 2, 3
    G, OG = attrs.get("group", 1), attrs.get("offset_group", 1)
    pads, st, dl = attrs.get("pads", [0] * 4), attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    OH = (H + pads[0] + pads[2] - ((KH - 1) * dl[0] + 1)) // st[0] + 1
    OW = (W + pads[1] + pads[3] - ((KW - 1) * dl[1] + 1)) // st[1] + 1
    x = rng.standard_normal((N, C, H, W)).astype(F)
    w = rng.standard_normal((OC, C // G, KH, KW)).astype(F)
    off = rng.uniform(-1.5, 1.5, (N, OG * 2 * KH * KW, OH, OW)).astype(F)
    ins, names = [x, w, off], ["x", "w", "o"]
    ins.append(rng.standard_normal(OC).astype(F) if with_bias else None)
    names.append("b" if with_bias else "")
    if with_mask:
        ins.append(rng.uniform(0, 1, (N, OG * KH * KW, OH, OW)).astype(F))
        names.append("m")
    n = helper.make_node("DeformConv", names, ["y"], name="dc", kernel_shape=[KH, KW], **attrs)
    got = both(n, ins, 22)
    np.testing.assert_allclose(got, reference(n, ins, 22), rtol=1e-5, atol=1e-5)


# --- Resize-11+ in full (the cases nn's Resize declines) ---------------------------------------
@pytest.mark.parametrize("attrs,inputs", [
    ({"mode": "cubic"}, {"scales": [1, 1, 1.7, 0.6]}),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, {"sizes": [2, 3, 5, 9]}),
    ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, {"scales": [1, 1, 2, 2]}),
    ({"mode": "linear", "antialias": 1}, {"scales": [1, 1, 0.5, 0.4]}),
    ({"mode": "cubic", "antialias": 1}, {"sizes": [2, 3, 3, 2]}),
    ({"mode": "nearest", "axes": [3, 2]}, {"scales": [2.5, 1.5]}),
    ({"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}, {"sizes": [9, 9]}),
    ({"mode": "nearest", "axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}, {"sizes": [3, 3]}),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
      "extrapolation_value": 7.0}, {"roi": [0, 0, -0.2, 0.3, 1, 1, 0.9, 1.3], "sizes": [2, 3, 5, 4]}),
    ({"mode": "linear", "linear_3_axes": 1}, {"scales": [1, 2, 1.5, 0.8]}),
])
def test_resize_full(attrs, inputs):
    attrs = dict(attrs)
    attrs.pop("linear_3_axes", 0)             # three interpolated axes: nn's Resize declines them
    x = np.random.default_rng(13).standard_normal((2, 3, 4, 6)).astype(F)
    roi = np.array(inputs["roi"], F) if "roi" in inputs else None
    sc = np.array(inputs["scales"], F) if "scales" in inputs else None
    sz = np.array(inputs["sizes"], np.int64) if "sizes" in inputs else None
    names = ["x", "roi" if roi is not None else "", "sc" if sc is not None else "", "sz" if sz is not None else ""]
    while not names[-1]:
        names.pop()
    ins = [x, roi, sc, sz][:len(names)]
    const = tuple(i for i in range(1, len(names)) if names[i])
    n = helper.make_node("Resize", names, ["y"], name="rs", **attrs)
    got = both(n, ins, 19, const=const)
    # float64 throughout, yet onnx's reference is up to ~2e-6 off the separable float64 result of
    # its own tables on plain cubic (onnxruntime is, too): hence not 1e-7
    np.testing.assert_allclose(got, reference(n, ins, 19, const=const), rtol=1e-5, atol=3e-6)


def test_resize_full_cubic_vs_onnxruntime():
    x = np.random.default_rng(14).standard_normal((1, 2, 5, 5)).astype(F)
    n = helper.make_node("Resize", ["x", "", "s"], ["y"], name="rs", mode="cubic")
    ins = [x, None, np.array([1, 1, 1.6, 2.0], F)]
    got = both(n, ins, 13, const=(2,))
    np.testing.assert_allclose(got, onnxruntime(n, ins, 13, const=(2,)), rtol=1e-5, atol=1e-5)


def test_maxunpool_model_with_computed_output_shape():
    """MaxUnpool(output_shape = Shape(X)), as exporters write it: the output shape is known only
    at run time (onnx's inference does not read output_shape). (MaxPool's Indices output is not
    run by nn.py's MaxPool, so the pooled values and indices are graph inputs here; Shape runs on
    the CPU only.) An odd input size (5 rows pooled to 2) would give indices beyond the unpooled
    (4, 4) shape that onnx's reference indexes into: those raise, tested above."""
    from hetero_explore.load.loader import load_model
    from hetero_explore.execution.runtime import run_graph
    x = np.random.default_rng(15).standard_normal((1, 2, 4, 4)).astype(F)
    mp = helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 2], strides=[2, 2])
    v, idx = (np.asarray(a) for a in ReferenceEvaluator(node_model(mp, [x], 11)).run(None, {"x": x}))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("MaxUnpool", ["v", "i", "s"], ["y"], name="mu", kernel_shape=[2, 2],
                              strides=[2, 2])]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [1, 2, 4, 4]),
                                       vi("v", TensorProto.FLOAT, [1, 2, 2, 2]),
                                       vi("i", TensorProto.INT64, [1, 2, 2, 2])],
                          [vi("y", TensorProto.FLOAT, ["a", "b", "c", "d"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    feeds = {"x": x, "v": v, "i": idx}
    graph = load_model(m, fold_constants=False)
    got = run_graph(graph, CPU, feeds)["y"]
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, feeds)[0])


# --- every image kernel compiles for a real GPU (sm_90 PTX), without FMA / approximations --------
_PTX_BODY = r'''
from hetero_explore.kernels import image as I, resize as R
A = lambda dt: types.Array(dt, 1, "C")
f32, f64, i64, i32 = types.float32, types.float64, types.int64, types.int32
K = {
 "_GRIDSAMPLE": [A(f32), A(f32), A(f32), A(i64), A(i64), i64, i64, i64],
 "_ROIALIGN": [A(f32), A(f32), A(i64), A(f32), A(i64), i64, i64, i64, f32, i64, i64, i64, A(i32)],
 "_COL2IM": [A(f32), A(f32)] + [A(i64)] * 6 + [i64, i64],
 "_FILL0": [A(f32)], "_FILL1": [A(f32)],
 "_UNPOOL": [A(f32), A(i64), A(f32), A(i64), A(i64), i64, A(i32)],
 "_MAXROIPOOL": [A(f32), A(f32), A(f32), i64, i64, i64, i64, i64, i64, f32, A(i32)],
 "_AFFINEGRID": [A(f32), A(f32), A(f64), A(i64), i64],
 "_DET": [A(f32), A(f32), A(f64), i64],
 "_DEFORMCONV": [A(f32)] * 6 + [A(i64), i64, i64],
 "_RESIZE_FULL": [A(f32), A(f32)] + [A(i64)] * 6 + [A(f64), A(i32), f32, i64],
}
print(json.dumps({name: stats(ptx(_retarget(getattr(R if name == "_RESIZE_FULL" else I, name).cuda.py, "cuda"), args))
                  for name, args in K.items()}))
'''


def test_image_kernels_compile_for_sm90():
    """The simulator runs kernels as Python: only a real compile shows that they type-check for
    the GPU (numba-cuda's math.floor returns a float, the simulator's an int) and keep the
    contract. float64 appears only in the kernels that compute in float64 on purpose (IEEE
    double: correctly rounded on both targets)."""
    from ptx_tools import PRELUDE, run_script
    got = run_script(PRELUDE + _PTX_BODY)
    assert len(got) == 11
    for name, s in got.items():
        assert s["fma"] == 0 and s["approx"] == 0 and s["ftz"] == 0, (name, s)
        assert (s["f64"] > 0) == (name in ("_AFFINEGRID", "_DET", "_RESIZE_FULL")), (name, s)
