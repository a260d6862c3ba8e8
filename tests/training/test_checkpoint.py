"""A variant's checkpoint: the state leaf by leaf under its tree path (rng keys included), the step reached
and everything recorded, read back as written; one of another configuration is refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attngeom.base.errors import InputError
from attngeom.training import checkpoint, runs


def state(width: int = 3):
    params = {"blocks": [{"w": jnp.arange(2 * width, dtype=jnp.float32).reshape(2, width)}]}
    rest = {"rng": jax.random.key(7), "count": jnp.array(4, jnp.uint32)}
    return params, rest, (jnp.full(width, 0.5, jnp.float32),)


def progress(done: int = 3) -> checkpoint.Progress:
    losses = np.zeros(10, np.float32)
    losses[:done] = [2.5, 2.25, 2.0][:done]
    maps = {0: np.full((1, 1, 2, 2), 0.5, np.float16)}
    return checkpoint.Progress(
        state(), done, losses, [{"step": 2, "val": 1.75}], [1.0, 2.0], maps, {0: np.ones((2, 1, 1, 2, 2), np.float16)}
    )


def test_a_checkpoint_is_read_back_as_written(tmp_path):
    path = tmp_path / "softmax_s0.npz"
    checkpoint.save_checkpoint(path, progress(), stamp={"variant": "softmax", "seed": 0})
    back = checkpoint.load_checkpoint(path, state(), steps=10)
    assert back.done == 3 and back.curve == [{"step": 2, "val": 1.75}] and back.score_max == [1.0, 2.0]
    np.testing.assert_array_equal(back.losses, progress().losses)
    assert back.losses.shape == (10,) and not back.losses[3:].any()  # zero from `done` on
    assert back.maps.keys() == {0} and back.maps[0].dtype == np.float16 and back.window_maps[0].shape == (2, 1, 1, 2, 2)
    for got, want in zip(jax.tree.leaves(back.state), jax.tree.leaves(state())):
        if jnp.issubdtype(want.dtype, jax.dtypes.prng_key):
            assert jnp.issubdtype(got.dtype, jax.dtypes.prng_key)
            np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(want))
        else:
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_the_state_is_stored_under_its_tree_paths(tmp_path):
    path = tmp_path / "c.npz"
    checkpoint.save_checkpoint(path, progress())
    with np.load(path) as z:
        names = set(z.files)
    assert {"state/0/blocks/0/w", "state/1/rng", "state/1/count", "state/2/0"} <= names
    assert {"done", "losses", "map_steps", "map_0", "window_steps", "windows_0"} <= names
    assert runs.STAMP not in names  # no stamp given, none written


def with_a_leaf_more():
    params, rest, opt = state()
    return params, {**rest, "dropout": jax.random.key(1)}, opt


@pytest.mark.parametrize("like", [lambda: state(4), with_a_leaf_more], ids=["another width", "another leaf"])
def test_a_checkpoint_of_another_configuration_is_refused(tmp_path, like):
    path = tmp_path / "c.npz"
    checkpoint.save_checkpoint(path, progress())
    with pytest.raises(InputError, match="checkpoint of another configuration"):
        checkpoint.load_checkpoint(path, like(), steps=10)
