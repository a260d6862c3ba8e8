"""The trajectory a run follows: the training code's hash, the stamp a resume compares, and the first fact that differs."""

from __future__ import annotations

from attngeom.training import trajectory


def test_the_code_hash_covers_the_trained_numbers_and_not_the_bookkeeping():
    hashed = {p.name for p in trajectory.code_files()}
    assert {
        "model.py",
        "train.py",
        "data.py",
        "checkpoint.py",
        "together.py",
        "variants.py",
        "train_config.py",
    } <= hashed
    assert not hashed & trajectory.BOOKKEEPING
    every = {p.name for p in trajectory.TRAINING.glob("*.py")}
    assert every - trajectory.BOOKKEEPING == hashed - {"variants.py", "train_config.py"}  # a new module is hashed
    assert trajectory.BOOKKEEPING <= every  # each one named exists


def test_mismatch_names_the_first_fact_that_differs():
    present = {"a": 1, "b": [1, 2], "c": "x"}
    assert trajectory.mismatch(dict(present), present) is None
    assert trajectory.mismatch({**present, "b": [1, 3]}, present) == "b was [1, 3], is now [1, 2]"
    assert trajectory.mismatch({"a": 1, "b": [1, 2]}, present) == 'c was null, is now "x"'
    assert "records no trajectory" in trajectory.mismatch(None, present)
