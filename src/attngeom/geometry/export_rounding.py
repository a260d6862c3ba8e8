"""The export identity with its rounding: how far an exported kernel map may lie from the kernel
recomputed from the exported q, k, b and eps, by the laws and floating-point arithmetic alone.

A kernel model computes in float32, from float32 q and k (full-precision matrix products),

    kappa = (q.k + b)^2 / (max(|q|^2 + |k|^2 - 2 q.k, 0) + eps),   w = kappa / (sum of the row's kappa + 1e-9),

then exports q, k and w rounded to float16 (to nearest), b and eps exactly. Whatever float32 q and k
it held, each exported weight lies in an interval the exported numbers fix:

- each component of q (and k) lies within half a float16 spacing r of its export (2**-25 at a zero);
  so |q.k - q~.k~| <= |q~|.r_k + r_q.(|k~| + r_k), summed over components, and by the triangle
  inequality |q - k| lies within ||r_q + r_k|| of |q~ - k~|;
- float32 arithmetic: a sum of n terms is off by at most gamma(n) = n u / (1 - n u) (u = 2**-24) times
  the sum of their magnitudes, in any order (Higham, Accuracy and Stability of Numerical Algorithms,
  section 3.1), and every other operation by a factor within 1 +- u. This check's own float64
  arithmetic (u = 2**-53) is covered by counting one float32 operation more at each step (its errors are
  below 2**-29 of what that adds), and where it subtracts large sums, by gamma(n) of them in float64;
- kappa increases with its numerator and decreases with its denominator; w_j increases with kappa_j
  and decreases with every other key's kappa and with the row sum's rounding: bounds on each bound w_j;
- the export of w: |fl16(w) - w| <= 2**-11 w + 2**-25 (half a spacing, relative, or half the subnormal
  spacing; their sum, not their larger one, also covers this check's float64 rounding of the bound).

A gap's share of its room (`room_share`) is |exported - recomputed| over the distance from the
recomputed weight to the interval's end on the gap's side: at most 1 wherever the identity holds, on
any machine that multiplies in float32. A matrix product in TF32 or bfloat16 rounds its products as
coarsely as the export does, and is not full precision.
"""

from __future__ import annotations

import numpy as np

U16 = 2.0**-11  # float16's unit roundoff: half a spacing, relative
SUBNORMAL16 = 2.0**-25  # half float16's smallest spacing: the most rounding moves a number below 2**-14
U32 = 2.0**-24
U64 = 2.0**-53
ONE_E9 = float(np.float32(1e-9))  # the row sum's floor, as float32 holds it


def gamma(n: int) -> float:
    """The bound on the relative error of n rounded float32 operations: n u / (1 - n u)."""
    return n * U32 / (1 - n * U32)


def half_spacing(x16: np.ndarray) -> np.ndarray:
    """How far the float32 number each float16 was rounded from can lie from it: half its spacing away from
    0 (a number just past a power of 2 in magnitude rounds back to it from the wider binade), float64."""
    return np.spacing(np.abs(np.asarray(x16, dtype=np.float16))).astype(np.float64) / 2  # away from 0


class Export:
    """A model's exported q and k (..., T, D): each component's rounding radius and a bound on the magnitude
    of the float32 number it came from, in float64, shared by every band of rows."""

    def __init__(self, q16: np.ndarray, k16: np.ndarray) -> None:
        self.D = q16.shape[-1]
        self.q = np.abs(q16.astype(np.float64))  # |q~|
        self.rq, self.rk = half_spacing(q16), half_spacing(k16)
        self.qa, self.ka = self.q + self.rq, np.abs(k16.astype(np.float64)) + self.rk  # |q| <= qa, |k| <= ka

    def kappa_interval(
        self, rows: slice, keys: slice, dots: np.ndarray, qq: np.ndarray, kk: np.ndarray, b, eps
    ) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the model's float32 kappa over every q and k that round to the export, on a band of
        rows and keys: (lo, hi), each (..., R, S). `dots`, `qq`, `kk`: the exported q.k, |q|^2, |k|^2 of
        the band in float64; `b`, `eps`: one per head (broadcast against the leading axes)."""
        D = self.D
        q, rq, qa = self.q[..., rows, :], self.rq[..., rows, :], self.qa[..., rows, :]
        rk, ka = self.rk[..., keys, :], self.ka[..., keys, :]
        t = lambda x: x.swapaxes(-1, -2)  # noqa: E731
        b = np.asarray(b, dtype=np.float64)[..., None, None]
        eps = np.asarray(eps, dtype=np.float64)[..., None, None]
        mags = qa @ t(ka)  # bounds sum |q_i k_i|
        # q.k + b: the export's rounding, and the model's float32 sum (gamma(D)); one operation more covers
        # this check's float64 sum, and the |b| beside it
        centre = np.abs(dots + b)
        off = q @ t(rk) + rq @ t(ka) + gamma(D + 1) * (mags + np.abs(b))
        num_lo = np.maximum(centre - off, 0.0) ** 2
        num_hi = (centre + off) ** 2
        # |q - k|: within ||r_q + r_k|| of the exported distance
        exported = np.sqrt(np.maximum(qq[..., :, None] + kk[..., None, :] - 2 * dots, 0.0))
        rho = np.sqrt((rq * rq).sum(-1)[..., :, None] + (rk * rk).sum(-1)[..., None, :] + 2 * (rq @ t(rk)))
        d_lo, d_hi = np.maximum(exported - rho, 0.0), exported + rho
        # the model's float32 |q|^2 + |k|^2 - 2 q.k errs by gamma(D + 2) of mag2 at most (each |q_i - k_i|
        # <= qa_i + ka_i); one operation more covers this check's float64 distance, square roots and
        # squares, which err by less than 1e-10 of mag2 at float16's magnitudes
        mag2 = (qa * qa).sum(-1)[..., :, None] + (ka * ka).sum(-1)[..., None, :] + 2 * mags
        den_lo = np.maximum(d_lo * d_lo - gamma(D + 3) * mag2, 0.0) + eps
        den_hi = d_hi * d_hi + gamma(D + 3) * mag2 + eps
        # + b, ^2, + eps, / (perhaps a reciprocal and a product) in float32; the float64 squares and
        # quotient here. eps is 0 where float32's softplus underflows: a key within rounding of its query
        # then has no upper bound, inf, which weight_interval reads as a weight of at most 1
        with np.errstate(divide="ignore"):
            return num_lo / den_hi * (1 - gamma(8)), num_hi / den_lo * (1 + gamma(8))

    @staticmethod
    def weight_interval(lo: np.ndarray, hi: np.ndarray, available: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the exported float16 weights of a band whose rows see every key they may attend,
        from bounds on kappa (`kappa_interval`); a key a row may not attend has weight 0 in both."""
        lo, hi = np.where(available, lo, 0.0), np.where(available, hi, 0.0)
        S = available.shape[-1]  # no row sums more keys
        row = gamma(S)  # the model's float32 row sum
        # + 1e-9 and / (perhaps a reciprocal and a product) in float32; the float64 products and quotient
        # here, within one float32 operation more. A weight lies in [0, 1]; an unbounded kappa (inf) leaves
        # the bounds it enters NaN (inf - inf, inf / inf), which fmax and fmin read as 0 and 1
        with np.errstate(invalid="ignore"):
            sum_lo, sum_hi = lo.sum(-1, keepdims=True), hi.sum(-1, keepdims=True)
            cancel = 2 * (S + 1) * U64 * sum_hi  # this check's float64 sum and difference: gamma(S + 1), at most
            rest_hi = sum_hi - hi + cancel  # every other key's kappa, at most
            rest_lo = np.maximum(sum_lo - lo - cancel, 0.0)  # and at least
            w_lo = np.fmax(lo / ((lo + rest_hi) * (1 + row) + ONE_E9) * (1 - gamma(9)), 0.0)
            w_hi = np.fmin(hi / ((hi + rest_lo) * (1 - row) + ONE_E9) * (1 + gamma(9)), 1.0)
        return (
            np.where(available, w_lo * (1 - U16) - SUBNORMAL16, 0.0),
            np.where(available, w_hi * (1 + U16) + SUBNORMAL16, 0.0),
        )


def room_share(exported: np.ndarray, recomputed: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each weight's gap |exported - recomputed| as a share of the room the interval [lo, hi] leaves on
    the gap's side of the recomputed weight: at most 1 exactly when the exported weight lies in it.
    A weight a row may not attend (0 in every array) has no gap and shares 0."""
    gap = exported.astype(np.float64) - recomputed
    room = np.where(gap >= 0, hi - recomputed, recomputed - lo)
    share = np.divide(np.abs(gap), room, out=np.full_like(gap, np.inf), where=room > 0)
    share[gap == 0] = 0.0
    return share
