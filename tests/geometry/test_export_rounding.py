"""export_rounding: exports lie in the interval the exported numbers fix (the model's own, at the laws'
edges: tests/bundles/test_layout_acceptance.py), the interval is tight, and a weight outside it is caught."""

import numpy as np
import pytest

from attngeom.bundles.layout import BundleModel
from attngeom.geometry import export_rounding, laws
from attngeom.measures import stats

H, T, D = 2, 12, 8


def bundle_of(q32: np.ndarray, k32: np.ndarray, b: list[float], eps: list[float], strict: bool) -> BundleModel:
    """One layer of a kernel model from float32 q and k (H, T, D) and b, eps per head: its weights from the
    laws in float64, then q, k and the weights rounded to float16 as telemetry exports them (the model's
    own float32 outputs: tests/bundles/test_layout_acceptance.py)."""
    T_ = q32.shape[-2]
    b32, eps32 = np.float32([b]), np.float32([eps])
    q, k = q32.astype(np.float64)[None], k32.astype(np.float64)[None]
    kappa = laws.kernel(laws.dots(q, k), (q * q).sum(-1), (k * k).sum(-1), b32, eps32)
    maps = laws.kernel_weights(kappa, laws.available_TT(T_, strict)).astype(np.float16)
    run = {"best_val": 1.0, "b_learned": b32.tolist(), "eps_learned": eps32.tolist()}
    q16, k16 = q32.astype(np.float16)[None], k32.astype(np.float16)[None]
    return BundleModel("goat_v" if strict else "yat_b", 0, np.zeros(T_, np.int32), {0: maps}, q16, k16, maps, run, {})


def law_export(strict: bool, scale: float = 1.0, seed: int = 1) -> BundleModel:
    """At a trained model's sizes: every other key close to its query, where the kernel is most sensitive to
    rounding; k = q under the strict mask, as the goat variants have it."""
    rng = np.random.default_rng(seed)
    q32 = (rng.normal(size=(H, T, D)) * scale).astype(np.float32)
    near = q32 + (rng.normal(size=q32.shape) * scale * 0.02).astype(np.float32)  # a key in its query's pocket
    k32 = q32 if strict else np.where(np.arange(T)[:, None] % 2, near, rng.normal(size=q32.shape) * scale)
    return bundle_of(q32, k32.astype(np.float32), [0.97, 0.13], [0.69, 0.0025], strict)


def share(model: BundleModel) -> float:
    return float(stats.reconstruction(model)[1].max())


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("scale", [0.1, 1.0, 20.0])
def test_exports_at_a_trained_models_sizes_lie_within_their_room(strict, scale):
    assert 0 < share(law_export(strict, scale)) <= 1.0


def _interval(model: BundleModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The recomputed weights of the model's one layer and their interval, on whole rows."""
    score = stats.scorer(model)
    T_ = model.attn_LHTT.shape[-1]
    available = laws.available_TT(T_, model.strict)
    export = export_rounding.Export(model.q_LHTD, model.k_LHTD)
    every = slice(0, T_)
    lo, hi = export.kappa_interval(every, every, score.dots, score.qq, score.kk, score.b, score.eps)
    lo, hi = export.weight_interval(lo, hi, available)
    return laws.kernel_weights(score(1.0), available)[0], lo[0], hi[0]


def test_a_weight_just_outside_its_interval_is_caught_and_one_at_its_edge_is_not():
    model = law_export(False, seed=5)
    weights, lo, hi = _interval(model)
    i = (1, 9, int(weights[1, 9].argmax()))  # a row's winner
    beyond, inside = np.float16(hi[i]), np.float16(hi[i])
    while beyond <= hi[i]:
        beyond = np.nextafter(beyond, np.float16(np.inf))
    while inside > hi[i]:
        inside = np.nextafter(inside, np.float16(0))
    assert weights[i] < inside < beyond and (beyond - weights[i]) / weights[i] < 0.01  # the room is tight
    for value, caught in ((beyond, True), (inside, False)):
        attn = model.attn_LHTT.copy()
        attn[(0, *i)] = value
        moved = BundleModel(
            model.variant, 0, model.tokens_T, {0: attn}, model.q_LHTD, model.k_LHTD, attn, model.run, {}
        )
        assert (share(moved) > 1.0) is caught


def test_an_eps_of_0_leaves_a_key_within_rounding_of_its_query_unbounded_and_is_read_without_a_warning():
    """Float32's softplus underflows to an eps of exactly 0; a key one float16 spacing from its query may
    then have any kappa, so its weight any value: the bound says so, quietly."""
    import warnings

    rng = np.random.default_rng(3)
    q32 = rng.normal(size=(1, 4, D)).astype(np.float32)
    k32 = rng.normal(size=(1, 4, D)).astype(np.float32)
    k32[0, 1] = q32[0, 3]
    k32[0, 1, 0] = np.nextafter(np.float16(q32[0, 3, 0]), np.float16(np.inf))  # its float16 neighbour
    model = bundle_of(q32, k32, [0.5], [0.0], False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights, lo, hi = _interval(model)
        assert (lo[0, 3, 1], hi[0, 3, 1]) == (-(2.0**-25), 1 + 2**-11 + 2**-25)  # anything in [0, 1]
        assert lo[0, 3, 0] == lo[0, 3, 2] == -(2.0**-25)  # the others: down to 0, as the key may take it all
        assert share(model) <= 1.0


def test_room_share_is_the_gap_over_the_room_on_its_side():
    recomputed = np.array([0.5, 0.5, 0.0, 0.25])
    lo, hi = np.array([0.4, 0.4, 0.0, 0.25]), np.array([0.7, 0.7, 0.0, 0.25])
    exported = np.array([0.6, 0.45, 0.0, 0.3])
    np.testing.assert_allclose(
        export_rounding.room_share(exported, recomputed, lo, hi), [0.5, 0.5, 0.0, np.inf]
    )  # a weight with no room (hi at the recomputed weight) moved at all is out
    assert export_rounding.room_share(np.array([0.6]), np.array([0.5]), np.array([0.4]), np.array([0.45])) == np.inf


def test_half_spacing_is_how_far_rounding_to_float16_can_move_a_number():
    x = np.array([1.0, -0.75, 0.0, 2.0**-20, 1000.0, -32.0], np.float16)
    np.testing.assert_array_equal(
        export_rounding.half_spacing(x), [2.0**-11, 2.0**-12, 2.0**-25, 2.0**-25, 0.25, 2.0**-6]
    )
    x32 = np.random.default_rng(2).normal(size=10_000).astype(np.float32) * np.float32(30)
    x16 = x32.astype(np.float16)
    assert (np.abs(x32 - x16.astype(np.float32)) <= export_rounding.half_spacing(x16)).all()
    assert export_rounding.gamma(2) == pytest.approx(2 * 2.0**-24, rel=1e-6)


def test_the_units_of_rounding_are_float16s_float32s_and_float64s():
    assert (export_rounding.U16, export_rounding.SUBNORMAL16) == (2.0**-11, 2.0**-25)
    assert (export_rounding.U32, export_rounding.U64) == (2.0**-24, 2.0**-53)
    assert export_rounding.ONE_E9 == 9.999999717180685e-10  # 1e-9 as the model's float32 holds it
    assert export_rounding.gamma(3) == 3 * 2.0**-24 / (1 - 3 * 2.0**-24)


def worst_rounding_export(seed: int, push: str, sign: int, T: int = 4) -> BundleModel:
    """An export whose float32 q and k sit at the far edge of what rounds to their float16 values, every
    rounding error pushing the last row's weight on key 0 up (`sign` 1) or down (-1): `push` "dot", its
    q.k up and every other key's down; "distance", key 0 in the query's pocket, the two moved toward
    each other (or apart)."""
    rng = np.random.default_rng(seed)
    q16, k16 = (rng.normal(size=(2, T, D))).astype(np.float16)
    if push == "distance":
        k16[0] = (q16[-1] + rng.normal(size=D) * 0.01).astype(np.float16)
    q, k = q16.astype(np.float64), k16.astype(np.float64)
    r_q, r_k = export_rounding.half_spacing(q16), export_rounding.half_spacing(k16)
    if push == "dot":
        q[-1] += sign * 0.99 * r_q[-1] * np.sign(k[0])
        k += sign * 0.99 * r_k * np.sign(q16[-1]) * np.where(np.arange(T) == 0, 1, -1)[:, None]
    else:
        toward = sign * np.sign(k[0] - q[-1])
        q[-1] += 0.99 * r_q[-1] * toward
        k[0] -= 0.99 * r_k[0] * toward
    # a component moved down past a power of 2 meets a finer spacing there: it keeps its float16 value
    q32, k32 = (np.where(x.astype(np.float16) == x16, x, x16).astype(np.float32) for x, x16 in ((q, q16), (k, k16)))
    return bundle_of(q32[None], k32[None], [0.97], [0.05 if push == "dot" else 1e-4], False)


@pytest.mark.parametrize(
    ("push", "sign", "reached"), [("dot", 1, 0.95), ("dot", -1, 0.95), ("distance", 1, 0.8), ("distance", -1, 0.9)]
)
def test_the_room_is_nearly_reached_by_the_worst_rounding_and_never_passed(push, sign, reached):
    """The bound is tight where the rounding errors all line up: its dot-product and distance terms each,
    above and below (measured: 0.966, 0.968, 0.819, 0.917 over these seeds)."""
    shares = [share(worst_rounding_export(seed, push, sign)) for seed in range(100)]
    assert reached < max(shares) <= 1.0


def _spec_interval(q16, k16, b: float, eps: float, strict: bool) -> tuple[list, list]:
    """export_rounding's documented interval of each exported weight of one head, in 60-digit decimals
    from the float16 numbers themselves (a float16's half spacing from its exponent, by frexp)."""
    import math
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    T_, D_ = q16.shape
    one, u32, u64 = Decimal(1), Decimal(2) ** -24, Decimal(2) ** -53
    gamma = lambda n: n * u32 / (1 - n * u32)  # noqa: E731
    exact = lambda x: Decimal(float(x))  # noqa: E731  float16 -> float64 -> decimal: exact
    half = lambda x: Decimal(2) ** (math.frexp(float(x))[1] - 12) if abs(float(x)) >= 2**-14 else Decimal(2) ** -25  # noqa: E731
    q, k = [[exact(x) for x in row] for row in q16], [[exact(x) for x in row] for row in k16]
    rq, rk = [[half(x) for x in row] for row in q16], [[half(x) for x in row] for row in k16]
    qa = [[abs(x) + r for x, r in zip(a, ra)] for a, ra in zip(q, rq)]
    ka = [[abs(x) + r for x, r in zip(a, ra)] for a, ra in zip(k, rk)]
    b, eps = exact(np.float32(b)), exact(np.float32(eps))
    kappa = []
    for t in range(T_):
        row = []
        for s in range(T_):
            mags = sum(x * y for x, y in zip(qa[t], ka[s]))
            off = sum(abs(x) * r for x, r in zip(q[t], rk[s])) + sum(r * y for r, y in zip(rq[t], ka[s]))
            off += gamma(D_ + 1) * (mags + abs(b))
            centre = abs(sum(x * y for x, y in zip(q[t], k[s])) + b)
            num = (max(centre - off, Decimal(0)) ** 2, (centre + off) ** 2)
            dist = sum((x - y) ** 2 for x, y in zip(q[t], k[s])).sqrt()
            rho = sum((x + y) ** 2 for x, y in zip(rq[t], rk[s])).sqrt()
            mag2 = sum(x * x for x in qa[t]) + sum(y * y for y in ka[s]) + 2 * mags
            den = (
                max(max(dist - rho, Decimal(0)) ** 2 - gamma(D_ + 3) * mag2, Decimal(0)) + eps,
                (dist + rho) ** 2 + gamma(D_ + 3) * mag2 + eps,
            )
            row.append((num[0] / den[1] * (1 - gamma(8)), num[1] / den[0] * (1 + gamma(8))))
        kappa.append(row)
    available = laws.available_TT(T_, strict)
    S, c = T_, exact(np.float32(1e-9))  # the keys of the band: no row sums more
    lo, hi = [], []
    for t in range(T_):
        seen = [s for s in range(T_) if available[t, s]]
        sum_lo, sum_hi = sum(kappa[t][s][0] for s in seen), sum(kappa[t][s][1] for s in seen)
        cancel = 2 * (S + 1) * u64 * sum_hi
        lo_row, hi_row = [0.0] * T_, [0.0] * T_
        for s in seen:
            k_lo, k_hi = kappa[t][s]
            rest_hi, rest_lo = sum_hi - k_hi + cancel, max(sum_lo - k_lo - cancel, Decimal(0))
            w_lo = max(k_lo / ((k_lo + rest_hi) * (1 + gamma(S)) + c) * (1 - gamma(9)), Decimal(0))
            w_hi = min(k_hi / ((k_hi + rest_lo) * (1 - gamma(S)) + c) * (1 + gamma(9)), one)
            lo_row[s] = float(w_lo * (1 - Decimal(2) ** -11) - Decimal(2) ** -25)
            hi_row[s] = float(w_hi * (1 + Decimal(2) ** -11) + Decimal(2) ** -25)
        lo.append(lo_row)
        hi.append(hi_row)
    return lo, hi


@pytest.mark.parametrize("strict", [False, True])
def test_each_weights_interval_is_the_one_the_module_documents(strict):
    """Every term of the bound, to 12 digits: its float16 radii, float32 operation counts and the float16
    export of the weight, recomputed from their statement in 60-digit arithmetic."""
    rng = np.random.default_rng(7)
    q16 = (rng.normal(size=(4, 3)) * [1.0, 0.01, 30.0]).astype(np.float16)
    q16[:2, 1] = [0.0, 2.0**-20]  # a zero and a subnormal: half the subnormal spacing each
    k16 = q16 if strict else (q16 + rng.normal(size=(4, 3)) * 0.1).astype(np.float16)
    model = bundle_of(q16[None].astype(np.float32), k16[None].astype(np.float32), [0.3], [0.02], strict)
    _, lo, hi = _interval(model)
    want_lo, want_hi = _spec_interval(q16, k16, 0.3, 0.02, strict)
    np.testing.assert_allclose(lo[0], want_lo, rtol=1e-12, atol=1e-20)  # its one head
    np.testing.assert_allclose(hi[0], want_hi, rtol=1e-12, atol=1e-20)


def test_a_windowed_models_shares_are_each_windows_own():
    """A leading window axis (the windows files' W) changes nothing of any window's bound."""
    one, two = law_export(False, seed=1), law_export(False, 2.0, seed=2)
    stack = lambda name: np.stack([getattr(one, name), getattr(two, name)])  # noqa: E731
    maps = stack("attn_LHTT")
    both = BundleModel("yat_b", 0, one.tokens_T, {0: maps}, stack("q_LHTD"), stack("k_LHTD"), maps, one.run, {})
    shares = stats.reconstruction(both)[1]
    assert shares.shape == (2, 1, H)
    np.testing.assert_array_equal(shares, [stats.reconstruction(one)[1], stats.reconstruction(two)[1]])
