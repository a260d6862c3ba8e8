"""The variants' table: one record per variant, and every other place agrees with it."""

from __future__ import annotations

import dataclasses

import pytest

from attngeom.backends.kaggle_kernel import definitions
from attngeom.base import variants
from attngeom.judgement import expected, judge


def test_the_published_variants_are_trainable_and_exactly_those_the_claims_are_about():
    """Publishing a variant is its line's `published=True` and its expected entries, nothing else."""
    assert set(variants.PUBLISHED) == {m for e in expected.load_claims() for m in judge.models_needed(e)}
    assert set(variants.PUBLISHED) <= set(variants.TRAINABLE)
    assert variants.BUNDLES == {"attngeom-qk": ("softmax", "yat_b"), "attngeom-goat": ("goat_v", "goat_nov")}


def test_records_are_frozen_and_found_by_name():
    spec = variants.variant("goat_v")
    assert spec.strict_mask and spec.kernel and not spec.qk_proj and spec.v_residual and spec.lr == 3e-2
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.lr = 1.0
    assert variants.find("nope") is None
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        variants.variant("nope")


def test_names_are_unique_and_trainable_variants_have_a_rate_and_a_bundle():
    names = [v.name for v in variants.VARIANTS_TABLE]
    assert len(names) == len(set(names))
    for v in variants.VARIANTS_TABLE:
        assert (v.lr is None) == (v.bundle is None), v.name
        assert v.kernel or (v.qk_proj and v.v_residual and not v.strict_mask), v.name  # softmax is the plain one


def test_kernel_definitions_name_the_published_variants_of_their_bundle():
    defs = definitions()
    assert set(defs) == set(variants.BUNDLES)
    for name, d in defs.items():
        assert d.variants == tuple(v for v in variants.PUBLISHED if variants.variant(v).bundle == name)
