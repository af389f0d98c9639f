"""Portable float32 math: accuracy (<= 2 ULP vs float64 rounded to float32),
special values, and bitwise equality between the CPU and the CUDA simulator."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import functools
import math

import numpy as np
import pytest
from numba import cuda, njit

from hetero_explore.kernels import pmath
from hetero_explore.kernels.target import CPU, CUDA, kernel_pair
from hetero_explore.kernels.pmath import (erf_f32, exp_f32, log_f32, pow_f32, sigmoid_f32, sqrt_f32,
                                                    tanh_f32)
from ptx_tools import PRELUDE as PTX_PRELUDE
from ptx_tools import run_script as run_ptx_script

F = np.float32
INF, NAN = np.inf, np.nan


def ordinal(a):
    i = np.asarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_dist(got, ref64):
    with np.errstate(over="ignore"):
        ref = np.asarray(ref64).astype(np.float32)
    got = np.asarray(got, dtype=np.float32)
    d = np.abs(ordinal(got) - ordinal(ref))
    gn, rn = np.isnan(got), np.isnan(ref)
    return np.where(gn & rn, 0, np.where(gn ^ rn, 2**32, d))


# every portable unary function, with its float64 reference and domain, from pmath's table
UNARY = list(pmath.UNARY)
REF = {name: p.reference for name, p in pmath.UNARY.items()}
FN = {name: p.fn for name, p in pmath.UNARY.items()}
DOMAIN = {name: p.domain for name, p in pmath.UNARY.items()}
MAX_ULP = {name: p.max_ulp for name, p in pmath.UNARY.items()}


def random_floats(rng, n, lo, hi):
    out, have = [], 0
    while have < n:
        b = rng.integers(0, 2**32, size=4 * n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        b = b[np.isfinite(b) & (b >= lo) & (b <= hi)]
        out.append(b)
        have += b.size
    return np.concatenate(out)[:n]


def sample(name, n=20000, seed=1):
    rng = np.random.default_rng(seed)
    lo, hi = DOMAIN[name]
    glo, ghi = (max(lo, -10.0), min(hi, 10.0))
    return np.concatenate([random_floats(rng, n // 2, lo, hi),
                           np.linspace(glo, ghi, n - n // 2).astype(np.float32)])


def canon(a):
    """uint32 bits with every NaN as one canonical NaN (LLVM does not preserve NaN
    sign/payload; see elementwise.py)."""
    a = np.asarray(a, dtype=np.float32)
    return np.where(np.isnan(a), np.float32(np.nan), a).astype(np.float32).view(np.uint32)


# one kernel per target and function, generated from one statement as the elementwise
# kernels are
_APPLY = {name: kernel_pair(f"test_pmath_{name}", "x, out", "out[i] = fn(x[i])", module=__name__, fn=p.fn)
          for name, p in pmath.UNARY.items()}
_POW = kernel_pair("test_pmath_pow", "x, y, out", "out[i] = pow_f32(x[i], y[i])", module=__name__)


def _cpu_pow(x, y, out):
    CPU.launch(_POW, out.shape[0], x, y, out)


def run_cpu1(name, xs):
    out = np.empty_like(xs)
    CPU.launch(_APPLY[name], out.shape[0], xs, out)
    return out


SPECIAL_IN = np.array([0.0, -0.0, INF, -INF, NAN, 1e-45, -1e-45, 1.1754944e-38, -1.1754944e-38,
                       3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, -0.5, 88.72283, 88.72284, -87.33655,
                       -103.97, -104.0, 9.0, 9.02, 3.9, 3.93, 0.84375, 1.25, 4.0, 0.625],
                      dtype=np.float32)


@pytest.mark.parametrize("name", UNARY)
def test_accuracy_within_2_ulp(name):
    xs = sample(name)
    got = run_cpu1(name, xs)
    with np.errstate(all="ignore"):
        ref = REF[name](xs.astype(np.float64)).astype(np.float64)
    d = ulp_dist(got, ref)
    assert d.max() <= MAX_ULP[name], (name, xs[np.argmax(d)], got[np.argmax(d)], ref[np.argmax(d)])


@pytest.mark.parametrize("name", UNARY)
def test_specials_match_float64_reference(name):
    got = run_cpu1(name, SPECIAL_IN)
    with np.errstate(all="ignore"):
        ref = REF[name](SPECIAL_IN.astype(np.float64)).astype(np.float64)
    d = ulp_dist(got, ref)
    assert d.max() <= 2, (name, SPECIAL_IN[np.argmax(d)], got[np.argmax(d)])
    # exact special values and signed zeros
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    exact = np.isinf(ref32) | (ref32 == 0) | np.isnan(ref32)
    assert np.array_equal(np.isnan(got[exact]), np.isnan(ref32[exact]))
    fin = exact & ~np.isnan(ref32)
    assert np.array_equal(got[fin].view(np.uint32), ref32[fin].view(np.uint32)), name


def test_named_specials():
    assert math.copysign(1, tanh_f32(F(-0.0))) < 0
    assert math.copysign(1, erf_f32(F(-0.0))) < 0
    assert math.copysign(1, sqrt_f32(F(-0.0))) < 0
    assert exp_f32(F(-0.0)) == 1 and exp_f32(F(INF)) == INF and exp_f32(F(-INF)) == 0
    assert exp_f32(F(88.8)) == INF and exp_f32(F(-110)) == 0
    assert 0 < exp_f32(F(-100)) < 1.2e-38  # subnormal result
    assert log_f32(F(0)) == -INF and log_f32(F(-0.0)) == -INF and np.isnan(log_f32(F(-1)))
    assert log_f32(F(1)) == 0 and log_f32(F(INF)) == INF
    assert sigmoid_f32(F(INF)) == 1 and sigmoid_f32(F(-INF)) == 0 and sigmoid_f32(F(0)) == 0.5
    assert tanh_f32(F(INF)) == 1 and tanh_f32(F(-INF)) == -1
    assert erf_f32(F(INF)) == 1 and erf_f32(F(-INF)) == -1
    assert np.isnan(sqrt_f32(F(-1))) and sqrt_f32(F(INF)) == INF
    for f in (exp_f32, log_f32, tanh_f32, sigmoid_f32, erf_f32, sqrt_f32):
        assert np.isnan(f(F(NAN)))
    # results are float32
    assert isinstance(exp_f32(F(1)), (float, np.floating))


POW_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, INF, -INF, NAN, 1e-45,
                         -1e-45, 2.5, -2.5, 3.4028235e38, 16777216.0, 16777217.0, 8388609.0, 1e-3],
                        dtype=np.float32)


def test_pow_special_grid_matches_numpy_semantics():
    xs, ys = (a.ravel() for a in np.meshgrid(POW_SPECIALS, POW_SPECIALS))
    got = np.empty_like(xs)
    _cpu_pow(xs, ys, got)
    with np.errstate(all="ignore"):
        ref = np.power(xs, ys)          # numpy array pow: C99 pow special cases
        ref64 = np.power(xs.astype(np.float64), ys.astype(np.float64))
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    sp = ~np.isnan(ref) & (np.isinf(ref) | (ref == 0))
    assert np.array_equal(got[sp].view(np.uint32), ref[sp].view(np.uint32))
    d = ulp_dist(got, ref64)
    assert d.max() <= 2, (xs[np.argmax(d)], ys[np.argmax(d)])
    # named C99 cases
    assert pow_f32(F(NAN), F(0)) == 1 and pow_f32(F(1), F(NAN)) == 1
    assert pow_f32(F(-1), F(INF)) == 1 and pow_f32(F(-2), F(3)) == -8
    assert math.copysign(1, pow_f32(F(-0.0), F(3))) < 0 and pow_f32(F(-0.0), F(-3)) == -INF
    assert pow_f32(F(-0.0), F(-2)) == INF and np.isnan(pow_f32(F(-8), F(1 / 3)))
    assert pow_f32(F(-INF), F(3)) == -INF and pow_f32(F(-INF), F(2)) == INF
    assert math.copysign(1, pow_f32(F(-INF), F(-3))) < 0


def test_pow_accuracy():
    rng = np.random.default_rng(3)
    n = 5000
    x1 = random_floats(rng, n, 0, np.inf)
    y1 = (rng.uniform(-100, 100, n) / np.maximum(np.abs(np.log(x1.astype(np.float64))), 1e-30)).astype(F)
    x2 = np.linspace(0.5, 2, n).astype(F)
    y2 = random_floats(rng, n, -300, 300)
    x3 = -random_floats(rng, n, 0, 1e4)
    y3 = rng.integers(-40, 41, n).astype(F)
    x4 = rng.integers(-30, 31, n).astype(F)
    y4 = rng.integers(-20, 21, n).astype(F)
    xs = np.concatenate([x1, x2, x3, x4])
    ys = np.concatenate([y1, y2, y3, y4])
    got = np.empty_like(xs)
    _cpu_pow(xs, ys, got)
    with np.errstate(all="ignore"):
        ref = np.power(xs.astype(np.float64), ys.astype(np.float64))
    d = ulp_dist(got, ref)
    assert d.max() <= 2, (xs[np.argmax(d)], ys[np.argmax(d)])
    # small integer powers are exact whenever the result is representable
    assert pow_f32(F(3), F(4)) == 81 and pow_f32(F(-2), F(10)) == 1024 and pow_f32(F(10), F(-1)) == F(0.1)


@pytest.mark.parametrize("y", [2.0, 3.0, 0.5, -1.0, 1.0])
def test_pow_fast_exponents(y):
    # x**2, x**3, sqrt, 1/x, x: (nearly) correctly rounded shortcuts with pow's special cases
    rng = np.random.default_rng(5)
    xs = np.concatenate([random_floats(rng, 20000, -np.inf, np.inf), POW_SPECIALS,
                         np.array([6.98e12, 6.99e12, -6.99e12, 1e-15, -1e-40, 1e-45], F)])
    ys = np.full_like(xs, y)
    got = np.empty_like(xs)
    _cpu_pow(xs, ys, got)
    with np.errstate(all="ignore"):
        ref = np.power(xs, ys)
        ref64 = np.power(xs.astype(np.float64), ys.astype(np.float64))
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    sp = ~np.isnan(ref) & (np.isinf(ref) | (ref == 0))
    assert np.array_equal(got[sp].view(np.uint32), ref[sp].view(np.uint32))
    d = ulp_dist(got, ref64)
    assert d.max() <= 1, (xs[np.argmax(d)], got[np.argmax(d)])


def test_other_argument_types_compute_in_float32():
    # a Python float (what a simulator kernel passes on) or an int is converted to
    # float32 first: same bits as the float32 call
    for f in FN.values():
        for v in (0.3, 2.7182817):
            assert F(f(v)).tobytes() == F(f(F(v))).tobytes(), (f, v)
    # an int goes through the same float32 conversion as a float: three functions show it (each
    # argument type is a compilation of its own, and every function's costs about a second)
    for name in ("exp", "tanh", "log"):
        assert F(FN[name](7)).tobytes() == F(FN[name](F(7))).tobytes(), name
    assert F(pow_f32(1.1, 3)).tobytes() == F(pow_f32(F(1.1), F(3))).tobytes()
    # no explicit signatures: they would stop numba-cuda from compiling these for the GPU
    for f in list(FN.values()) + [pow_f32]:
        assert f._can_compile


def test_cuda_simulator_bitwise_equal_to_cpu():
    rng = np.random.default_rng(7)
    for name in UNARY:
        lo, hi = DOMAIN[name]
        xs = np.concatenate([random_floats(rng, 150, lo, hi),
                             np.linspace(max(lo, -10.0), min(hi, 10.0), 150).astype(F), SPECIAL_IN])
        cpu = run_cpu1(name, xs)
        d_x = cuda.to_device(xs)
        d_out = cuda.device_array_like(xs)
        CUDA.launch(_APPLY[name], xs.size, d_x, d_out)
        gpu = d_out.copy_to_host()
        assert np.array_equal(canon(cpu), canon(gpu)), name
    xs, ys = (a.ravel() for a in np.meshgrid(POW_SPECIALS, POW_SPECIALS))
    xs = np.concatenate([xs, random_floats(rng, 200, 0, 1e6)])
    ys = np.concatenate([ys, rng.uniform(-5, 5, 200).astype(F)])
    cpu = np.empty_like(xs)
    _cpu_pow(xs, ys, cpu)
    d_out = cuda.device_array_like(xs)
    CUDA.launch(_POW, xs.size, cuda.to_device(xs), cuda.to_device(ys), d_out)
    assert np.array_equal(canon(cpu), canon(d_out.copy_to_host()))


def test_public_names():
    for n in pmath.__all__:
        assert hasattr(pmath, n), n


# --- the real CUDA target (no GPU needed: numba-cuda + libNVVM compile to PTX) -----------------
# The simulator runs the CPU-compiled scalar functions, so it cannot show what the GPU
# compiler does with them. This compiles every elementwise CUDA kernel (of the definitions the
# CUDA provider claims; that covers each
# pmath function) for
# sm_90 in a subprocess with the simulator off and inspects the PTX: float32 only (no
# .f64), IEEE division and square root (no .approx, .full or .ftz), and whether a*b+c
# was contracted into fma (which would break bitwise CPU == GPU).
_PTX_SCRIPT = PTX_PRELUDE + r'''
from hetero_explore.kernels import elementwise as ew, pmath

A = lambda t: types.Array(t, 1, "C")
f32, i64, i32, b1 = types.float32, types.int64, types.int32, types.boolean

from hetero_explore.kernels.elementwise import elementwise_ops, launch_signature
K = {}
for d in elementwise_ops():      # every elementwise CUDA kernel, from the op definitions
    if "cuda" not in d.targets:  # CPU-only definitions (libm float64) never compile for a GPU
        continue
    for pair in d.kernels:
        K[pair.name] = (pair.cuda, launch_signature(d, pair))
res = {}
for name, (k, args) in K.items():
    fn = _retarget(k.py, "cuda")
    try:
        # one compilation per kernel, as the provider makes it (own_compilation: NVVM -fma=0); a
        # second one with fma=False passed explicitly gave the same PTX and doubled the time
        res[name] = {"project": stats(ptx(fn, args))}
    except Exception as e:
        res[name] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}

print(json.dumps(res))
'''


# the no-FMA option is this project's only: a user's own kernel compiled outside
# own_compilation() keeps numba-cuda's defaults (NVVM contracts its a*b+c). A script of its own:
# the sweep above takes minutes, and under xdist each worker that needs it compiles it again
_USER_PTX_SCRIPT = PTX_PRELUDE + r'''
A = lambda t: types.Array(t, 1, "C")
f32 = types.float32
from numba import cuda


def user_kernel(x, y, z, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] * y[i] + z[i]


cres = cc.compile_cuda(user_kernel, types.void, (A(f32),) * 4, fastmath=False, cc=(9, 0))
plain = nvvm.compile_ir(cres.library.llvm_strs, arch="compute_90", opt=3, fastmath=False)
print(json.dumps({"plain": stats(plain.decode() if isinstance(plain, bytes) else plain),
                  "project": stats(ptx(user_kernel, (A(f32),) * 4))}))
'''


@functools.lru_cache(maxsize=1)
def _gpu_ptx_stats():
    return run_ptx_script(_PTX_SCRIPT)


@pytest.mark.slow
def test_gpu_target_compiles_float32_ieee_only():
    res = {k: v for k, v in _gpu_ptx_stats().items() if not k.startswith("__")}
    for name, r in res.items():
        assert "error" not in r, (name, r)
        # float64 kernels (kind f64) compute in double by definition; every other kernel must not
        f64_ok = name.endswith("_f64")
        s = r["project"]
        assert (f64_ok or s["f64"] == 0) and s["approx"] == 0 and s["ftz"] == 0, (name, s)
        assert s["fma"] == 0, (name, r)


@pytest.mark.slow
def test_gpu_target_does_not_contract_fma():
    # numba-cuda leaves NVVM at its default -fma=1 unless fastmath is on; common.py asks
    # for -fma=0 (a contracted a*b+c rounds once and would differ from the CPU)
    res = {k: v for k, v in _gpu_ptx_stats().items() if not k.startswith("__")}
    assert len(res) >= 40   # every elementwise kernel of the op definitions
    assert {n: r["project"]["fma"] for n, r in res.items()} == {n: 0 for n in res}


@pytest.mark.slow
def test_no_fma_option_applies_only_to_this_projects_compilations():
    user = run_ptx_script(_USER_PTX_SCRIPT)
    assert user["plain"]["fma"] > 0, user       # numba-cuda's default, untouched for users
    assert user["project"]["fma"] == 0, user    # inside own_compilation()


# --- trigonometric argument reduction ---------------------------------------------------------
def test_two_over_pi_table_is_the_known_bits():
    # fdlibm's ipio2 table starts 0xA2F983 0x6E4E44 0x1529FC 0x2757D1 0xF534DD 0xC0DB62
    t = pmath.TWO_OVER_PI
    assert [int(t[24 * k]) & 0xFFFFFF for k in range(1, 7)] == [0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1,
                                                                 0xF534DD, 0xC0DB62]


def test_trig_large_and_hard_arguments():
    # huge arguments, arguments next to multiples of pi/2 (the hardest to reduce) and the
    # switch points of each function's ranges: <= 1 ULP against float64 numpy
    near = np.array([np.nextafter(F(k * np.pi / 2), F(np.inf * s)) for k in range(1, 400) for s in (1, -1)], F)
    big = np.array([1e38, 3.4028235e38, 1.6e38, 2.0 ** 100, 8.0e18, 16777217.0, 1e9, 102940.4,
                    0.78539819, 0.78539813, 1.5707964, 3.1415927, 6.2831855, 4.0e5], F)
    xs = np.concatenate([near, big, -big])
    for name in ("sin", "cos", "tan"):
        got = run_cpu1(name, xs)
        d = ulp_dist(got, REF[name](xs.astype(np.float64)))
        assert d.max() <= 1, (name, xs[np.argmax(d)])
    pts = np.array([7 / 16, 11 / 16, 19 / 16, 39 / 16, 0.5, 1.0, 2.0, 9.0, 2.0 ** 12, 2.0 ** -12], F)
    pts = np.concatenate([pts, np.nextafter(pts, F(0)), np.nextafter(pts, F(np.inf))])
    for name in ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh"):
        lo, hi = DOMAIN[name]
        x = np.concatenate([pts, -pts])
        x = x[(x >= lo) & (x <= hi)]
        with np.errstate(all="ignore"):
            d = ulp_dist(run_cpu1(name, x), REF[name](x.astype(np.float64)))
        assert d.max() <= 1, (name, x[np.argmax(d)])


def test_trig_named_specials():
    from hetero_explore.kernels.pmath import (acos_f32, acosh_f32, asin_f32, atan_f32, atanh_f32,
                                                        cos_f32, cosh_f32, sin_f32, sinh_f32, tan_f32)
    for f in (sin_f32, tan_f32, asin_f32, atan_f32, sinh_f32, atanh_f32):
        assert math.copysign(1, f(F(-0.0))) < 0, f
    for f in (sin_f32, cos_f32, tan_f32):
        assert np.isnan(f(F(INF))) and np.isnan(f(F(-INF)))
    assert cos_f32(F(0)) == 1 and cosh_f32(F(0)) == 1 and acos_f32(F(1)) == 0 and acosh_f32(F(1)) == 0
    assert np.isnan(asin_f32(F(1.0000001))) and np.isnan(acosh_f32(F(0.5))) and np.isnan(atanh_f32(F(2)))
    assert atanh_f32(F(1)) == INF and atanh_f32(F(-1)) == -INF
    assert atan_f32(F(INF)) == F(np.pi / 2) and acos_f32(F(-1)) == F(np.pi)
    assert sinh_f32(F(90)) == INF and cosh_f32(F(-90)) == INF and sinh_f32(F(-90)) == -INF


# --- branch-free hot functions: exact powers of two, range switch points, vectorised loops --------
def test_float_exponent_powers_of_two_are_exact():
    @njit(error_model="numpy")
    def pow2(ks, out):
        for i in range(ks.shape[0]):
            out[i] = pmath._pow2f(ks[i])

    ks = np.arange(-126, 128).astype(F)
    out = np.empty_like(ks)
    pow2(ks, out)
    assert out.tobytes() == np.ldexp(F(1), ks.astype(np.int32)).astype(F).tobytes()
    # out of range (the dropped lanes of branch-free code) is clamped, never undefined:
    # below -126 and NaN give 0, above 127 gives inf
    odd = np.array([-127, -200, -1e30, np.nan, 128, 300, 1e30, np.inf, -np.inf], F)
    out = np.empty_like(odd)
    pow2(odd, out)
    assert out.tolist() == [0, 0, 0, 0, np.inf, np.inf, np.inf, np.inf, 0]


def test_scale_rounds_once():
    # p * 2**k for every exponent exp can produce, subnormal and overflowing results included:
    # the float64 product is exact, so rounding it to float32 is the one correct rounding
    @njit(error_model="numpy")
    def scale(p, k, out):
        for i in range(p.shape[0]):
            out[i] = pmath._scale(p[i], k[i])

    rng = np.random.default_rng(3)
    k = np.repeat(np.arange(-152, 129), 40).astype(F)
    p = rng.uniform(0.7, 1.45, k.size).astype(F)
    p[::7] = -p[::7]
    out = np.empty_like(p)
    scale(p, k, out)
    with np.errstate(over="ignore"):
        ref = np.ldexp(p.astype(np.float64), k.astype(np.int32)).astype(F)
    assert out.tobytes() == ref.tobytes()


def test_exp_pair_and_scale_pair_are_the_bits_of_two_scales():
    # _exp_pair scales by one exact 2**k (|a| <= 87 keeps k in [-126, 127]) and _scale_pair
    # shares _scale's two powers: both must give exactly _scale(p, k), _scale(plo, k)
    @njit(error_model="numpy")
    def both(a, k, pl, out):
        for i in range(a.shape[0]):
            p, plo, kf = pmath._exp_core(a[i], F(0))
            eh, el = pmath._exp_pair(a[i])
            out[i, 0], out[i, 1] = eh, el
            out[i, 2], out[i, 3] = pmath._scale(p, kf), pmath._scale(plo, kf)
            out[i, 4], out[i, 5] = pmath._scale_pair(pl[i], pl[i] * F(1e-8), k[i])
            out[i, 6], out[i, 7] = pmath._scale(pl[i], k[i]), pmath._scale(pl[i] * F(1e-8), k[i])

    rng = np.random.default_rng(11)
    a = np.concatenate([rng.uniform(-87, 87, 200_000), np.linspace(-87, 87, 20_001),
                        [0.0, -0.0, 1e-30, -1e-30]]).astype(F)
    a = np.concatenate([a, _neighbours([87.0, -87.0, 0.5 * np.log(2), 9.0, 20.0, -17.0], span=20)])
    k = rng.integers(-152, 129, a.size).astype(F)
    pl = rng.uniform(0.7, 1.45, a.size).astype(F)
    out = np.empty((a.size, 8), F)
    both(a, k, pl, out)
    assert out[:, 0:2].tobytes() == out[:, 2:4].tobytes()
    assert out[:, 4:6].tobytes() == out[:, 6:8].tobytes()


@pytest.mark.parametrize("fn", ["_pow2f", "_scale_powers", "_scale", "_scale_pair", "_reduce", "_exp_core",
                                "_exp_pair", "log_f32", "tanh_f32", "erf_f32", "_erf_near", "erf_near_f32",
                                "exp_nonpos_f32", "sigmoid_near_f32"])
def test_branch_free_helpers_are_one_block_of_numba_ir(fn):
    # a conditional expression is three blocks of numba IR, and numba's inliner deep-copies
    # the callee's IR block by block at every inlined call site: with `x if c else y` these
    # helpers took minutes to compile inside sinh/cosh. They use pmath._sel (one select).
    from numba.core.compiler import run_frontend
    assert len(run_frontend(getattr(pmath, fn).py_func).blocks) == 1, fn


def test_sel_is_the_conditional_expression():
    @njit(error_model="numpy")
    def sel(c, a, b, i, j, out, iout):
        for n in range(c.shape[0]):
            out[n] = pmath._sel(c[n], a[n], b[n])
            iout[n] = pmath._sel(c[n], i[n], j[n])

    rng = np.random.default_rng(5)
    c = rng.integers(0, 2, 1000).astype(np.bool_)
    a = rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32).view(F)
    b = rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32).view(F)
    i, j = rng.integers(-2**40, 2**40, (2, 1000))
    out, iout = np.empty_like(a), np.empty_like(i)
    sel(c, a, b, i, j, out, iout)
    assert out.view(np.uint32).tolist() == np.where(c, a, b).view(np.uint32).tolist()
    assert iout.tolist() == np.where(c, i, j).tolist()


def _neighbours(points, span=40):
    """float32 values within ``span`` ULP of each point, both signs."""
    out = []
    for v in points:
        v = F(v)
        lo = hi = v
        for _ in range(span):
            lo, hi = np.nextafter(lo, F(-np.inf)), np.nextafter(hi, F(np.inf))
            out += [lo, hi]
        out.append(v)
    a = np.array(out, dtype=F)
    return np.concatenate([a, -a])


@pytest.mark.parametrize("name", ["exp", "tanh", "erf", "log", "sigmoid"])
def test_range_switch_points(name):
    # the branch-free forms select between ranges: around each switch point the result must be
    # the accurate one (each input got its own range's formula) and the CPU equal the simulator
    points = {"exp": [pmath.EXP_HI, pmath.EXP_LO, 88.72283, -87.33655, 0.0, -103.97],
              "tanh": [pmath.TANH_SMALL, pmath.TANH_ONE, 9.01, 0.0],
              "erf": [pmath.ERF_A, pmath.ERF_B, pmath.ERF_C, 3.92, 0.0],
              "log": [1.0, pmath.MIN_NORMAL, 2.0 ** -149 * 64, 3.4e38, np.sqrt(2.0)],
              "sigmoid": [pmath.EXP_LO, -pmath.EXP_LO, 0.0, 88.0, -88.0]}[name]
    xs = _neighbours(points)
    lo, hi = DOMAIN[name]
    xs = xs[(xs >= lo) & (xs <= hi)]
    got = run_cpu1(name, xs)
    with np.errstate(all="ignore"):
        d = ulp_dist(got, REF[name](xs.astype(np.float64)))
    assert d.max() <= MAX_ULP[name], (name, xs[np.argmax(d)], d.max())
    d_out = cuda.device_array_like(xs)
    CUDA.launch(_APPLY[name], xs.size, cuda.to_device(xs), d_out)
    assert np.array_equal(canon(got), canon(d_out.copy_to_host())), name


@pytest.mark.parametrize("kernel", ["_Exp_f32_cpu", "_Tanh_f32_cpu", "_Erf_f32_cpu", "_Sigmoid_f32_cpu",
                                    "_Log_f32_cpu", "_Gelu_erf_f32_cpu", "_Gelu_tanh_f32_cpu"])
def test_hot_unary_kernels_vectorise(kernel):
    # the models' transcendental nodes (GELU's Tanh/Erf, Sigmoid, Softmax's exp) run these CPU
    # loops; a branch or a non-inlined call in the per-element function stops LLVM from
    # vectorising them (measured ~10x slower), so the optimised IR must hold vector float ops
    import re

    from hetero_explore.kernels import elementwise  # noqa: F401  (generates the kernels)
    from hetero_explore.kernels.common import _retarget
    from hetero_explore.kernels.target import GENERATED

    fresh = njit(cache=False, error_model="numpy")(_retarget(GENERATED[kernel].py, "cpu"))
    x = np.ones(16, F)
    fresh(x, np.empty_like(x), F(0), F(0), 0)
    ir = fresh.inspect_llvm(fresh.signatures[0])
    assert len(re.findall(r"<(?:4|8|16) x float>", ir)) >= 20, kernel


# --- restricted-range variants for the CPU fast paths: the bits of the full functions -----------
def _patterns(lo, hi, step):
    """Every ``step``-th float32 bit pattern in [lo, hi) (as uint32 codes), as float32."""
    return np.arange(lo, hi, step, dtype=np.uint64).astype(np.uint32).view(F)


@njit(error_model="numpy")
def _exp_both(x, a, b):
    for i in range(x.shape[0]):
        a[i] = pmath.exp_nonpos_f32(x[i])
        b[i] = exp_f32(x[i])


@njit(error_model="numpy")
def _erf_both(x, a, b):
    for i in range(x.shape[0]):
        a[i] = pmath.erf_near_f32(x[i])
        b[i] = erf_f32(x[i])


def test_exp_nonpos_is_exp_bits_for_x_at_most_zero():
    # Softmax's exp(v - max): v - max is <= 0 or NaN. Every 97th negative pattern (subnormal and
    # underflowing results included), the range switch points, signed zeros, infinities, NaNs
    # Checked on all 2**31 negative patterns and every NaN when it was written.
    x = np.concatenate([_patterns(0x80000000, 0x100000000, 97), _neighbours([pmath.EXP_LO, -87.33655, -103.97,
                        -86.5, -0.5 * np.log(2)], span=200), np.array([0.0, -0.0, -np.inf, np.nan, -np.nan], F),
                        _patterns(0x7F800001, 0x7F800001 + 1000, 1), _patterns(0xFF800001, 0xFF800001 + 1000, 1)])
    x = x[~(x > 0)]
    a, b = np.empty_like(x), np.empty_like(x)
    _exp_both(x, a, b)
    assert np.array_equal(canon(a), canon(b))


@njit(error_model="numpy")
def _sigmoid_both(x, a, b):
    for i in range(x.shape[0]):
        a[i] = pmath.sigmoid_near_f32(x[i])
        b[i] = sigmoid_f32(x[i])


def test_sigmoid_near_is_sigmoid_bits_up_to_64():
    # the Sigmoid fast path's pass: e**-|x| from _exp_pair and the quotient's product error by an
    # fma, for |x| <= SIG_NEAR. Every 61st pattern there, the switch points of exp and of the
    # quotient's sign, signed zeros, tiny values. All 2.2e9 patterns were checked when it was written.
    lim = int(np.array([pmath.SIG_NEAR], F).view(np.uint32)[0])
    x = np.concatenate([_patterns(0, lim + 1, 61), _neighbours([pmath.SIG_NEAR, 0.0, 1e-30, 0.5 * np.log(2),
                        16.0, 17.0, 88.0 / 2], span=200), np.array([0.0, 2.0 ** -149, 2.0 ** -126], F)])
    x = np.concatenate([x, -x])
    x = x[np.abs(x) <= pmath.SIG_NEAR]
    a, b = np.empty_like(x), np.empty_like(x)
    _sigmoid_both(x, a, b)
    assert np.array_equal(canon(a), canon(b))


def test_erf_near_is_erf_bits_below_1_25():
    # the Erf fast path's first pass: erf_f32's first two ranges only, for |x| < ERF_B
    x = np.concatenate([_patterns(0, 0x3FA00000, 31), _neighbours([pmath.ERF_A, 0.0, 1e-30], span=200),
                        np.nextafter(np.full(200, pmath.ERF_B, F), F(0)) - np.arange(200, dtype=F) * F(2 ** -23)])
    x = np.concatenate([x, -x])
    x = x[np.abs(x) < pmath.ERF_B]
    a, b = np.empty_like(x), np.empty_like(x)
    _erf_both(x, a, b)
    assert np.array_equal(canon(a), canon(b))
