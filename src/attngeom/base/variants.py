"""The attention variants of the original runs: one frozen record each, read by everything else.

The bundle reader (mask rule, which runs carry learned kernel scalars), the model (which
projections a variant has, its score), the trainer (learning rates), the local rerun (which bundle
folder holds which variant), the figures (labels) and the Kaggle kernel definitions all take
their facts from `VARIANTS_TABLE`; adding a variant is one line here (a published one: with
`published=True`, its bundle files' sha256 in fetch.REGISTRY and its expected entries in expected/).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    """One attention variant of the original script."""

    name: str
    strict_mask: bool  # row i sees keys j < i (else j <= i)
    kernel: bool  # the Yat kernel (q.k + b)^2 / (|q - k|^2 + eps), else softmax of scaled dot products
    qk_proj: bool  # q and k are learned projections (else the raw head slices of LN1(x))
    v_residual: bool  # v is a learned projection of the residual stream (else v = q)
    lr: float | None  # the original learning rate; None: not trained here
    bundle: str | None  # the bundle folder a rerun writes it into; None: not trained here
    label: str  # how figures name it
    published: bool = False  # one of the variants the published claims are about (PUBLISHED)


# goat_nov's rate is not recorded and is taken to be goat_v's; yat (fixed b = 0, eps = 1) is only read.
VARIANTS_TABLE = (
    # Variant(name, strict_mask, kernel, qk_proj, v_residual, lr, bundle, label, published): one line each.
    Variant("softmax", False, False, True, True, 3e-4, "attngeom-qk", "softmax", published=True),
    Variant("yat_b", False, True, True, True, 3e-3, "attngeom-qk", "Yat kernel", published=True),
    Variant("goat_v", True, True, False, True, 3e-2, "attngeom-goat", "GOAT", published=True),
    Variant("goat_nov", True, True, False, False, 3e-2, "attngeom-goat", "GOAT, v = q"),
    Variant("yat", False, True, True, True, None, None, "Yat kernel, fixed b and eps"),
)
# The variants the published claims are about, in the table's order.
PUBLISHED = tuple(v.name for v in VARIANTS_TABLE if v.published)
_BY_NAME = {v.name: v for v in VARIANTS_TABLE}
TRAINABLE = tuple(v.name for v in VARIANTS_TABLE if v.bundle is not None)
# bundle folder -> the variants a rerun writes into it
BUNDLES = {
    b: tuple(v.name for v in VARIANTS_TABLE if v.bundle == b)
    for b in dict.fromkeys(v.bundle for v in VARIANTS_TABLE)
    if b is not None
}


def variant(name: str) -> Variant:
    """The record of a variant; an unknown name is a ValueError that lists the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(_BY_NAME)}") from None


def find(name: str) -> Variant | None:
    """The record of a variant, None for a name the table lacks (a bundle may hold one)."""
    return _BY_NAME.get(name)


def strict_mask(name: str) -> bool:
    """Whether a variant's queries never see their own position (False for a name the table lacks)."""
    spec = find(name)
    return spec is not None and spec.strict_mask


def kernel_law(name: str) -> bool | None:
    """Whether a variant's rows follow the kernel's law (None for a name the table lacks: unknown)."""
    spec = find(name)
    return None if spec is None else spec.kernel


PUBLISHED_PRESET, PUBLISHED_SEED = "paper", 0


def model_key(variant: str, seed: int) -> str:
    """How summaries, ensembles and wall times name one model of a run: `<variant>_s<seed>`."""
    return f"{variant}_s{seed}"


def model_of(key: str) -> tuple[str, int]:
    """The variant and seed a `model_key` names."""
    variant, seed = key.rsplit("_s", 1)
    return variant, int(seed)


def published_run(preset: str, seed: int, name: str) -> bool:
    """Whether a run of this preset, seed and variant retrains one the author published (the only runs
    whose statistics can stand beside the published bundles')."""
    return preset == PUBLISHED_PRESET and seed == PUBLISHED_SEED and name in PUBLISHED
