"""The driver of the author's script (`training.original`): the script offline with the verified corpus, as
a module writing under its own folder, and the recorder around its `nnx.jit`."""

from __future__ import annotations

import sys
import types
import urllib.request

import pytest

from attngeom.base import fetch
from attngeom.training import original


def test_the_script_gets_the_verified_corpus_and_nothing_else(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import urllib.request\n"
        f"TEXT = urllib.request.urlopen({fetch.CORPUS_URL!r}, timeout=60).read()\n"
        "try:\n    urllib.request.urlopen('https://example.org/other')\n"
        "except PermissionError as e:\n    REFUSED = str(e)\n",
        encoding="utf-8",
    )
    real = urllib.request.urlopen
    module = original.load_script(script, b"corpus bytes", tmp_path / "work")
    assert module.TEXT == b"corpus bytes" and "example.org" in module.REFUSED
    assert module.__file__ == str(tmp_path / "work" / "script.py")
    assert urllib.request.urlopen is real


def test_the_served_corpus_answers_its_url_only(tmp_path):
    urlopen = original.serve_corpus(b"text")
    assert urlopen(fetch.CORPUS_URL).read() == b"text"
    assert urlopen(urllib.request.Request(fetch.CORPUS_URL), timeout=1).read() == b"text"  # a Request too
    with pytest.raises(PermissionError, match="only the corpus is served"):
        urlopen(fetch.CORPUS_URL + "?again")


def test_the_script_runs_as_its_own_module_not_as_main(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, original.MODULE_NAME, raising=False)
    script = tmp_path / "train.py"
    script.write_text("NAME = __name__\nMAIN = __name__ == '__main__'\n", encoding="utf-8")
    module = original.load_script(script, b"", tmp_path / "w")
    assert (module.NAME, module.MAIN) == (original.MODULE_NAME, False)
    assert sys.modules[original.MODULE_NAME] is module  # the script's own imports of itself find it


def test_the_recorder_records_the_first_model_and_every_loss_of_train_step_alone():
    jitted = []
    nnx = types.SimpleNamespace(jit=lambda fn: jitted.append(fn.__name__) or fn, Module=object)
    seen = []
    recorder = original.Recorder(nnx, lambda model: seen.append(model) or (len(seen), 1.0, 2.0))

    def train_step(model, x):
        return model + x

    def eval_step(model, x):
        return model - x

    step, other = recorder.jit(train_step), recorder.jit(eval_step)
    assert jitted == ["train_step", "eval_step"] and other is eval_step  # other functions are jitted as they are
    assert [step(10, 1), step(20, 2)] == [11, 22]
    assert recorder.initial == (1, 1.0, 2.0) and seen == [10]  # the model before the first update, once
    assert recorder.losses == [11.0, 22.0]
    assert recorder.Module is object  # the rest of nnx passes through
