"""`bench profile`: each XLA operation of a traced step put in its class by its source, its own time
without its nested operations', and the real trace of a smoke step through the command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
import bench_profile  # bench/ is not a package: found on the path set above

HLO = """\
  %ynn_fusion.89 = f32[8192,192]{1,0} fusion(%bitcast.331, %gte.1), kind=kCustom, calls=%fc.89, metadata={op_name="jit(run)/while/body/transpose(jvp())/dot_general" stack_frame_id=444}
  %broadcast_add_fusion.20 = u32[64,4,128,128]{3,2,1,0} fusion(%copy.870), kind=kLoop, metadata={op_name="jit(run)/while/body/jvp(jit(_bernoulli))/jit(_uniform)/while/body/closed_call/add" st=1}
  ROOT %copy_bitcast_fusion.49 = f32[192,8192]{1,0} fusion(%ynn_fusion.79), kind=kLoop, metadata={op_name="jit(run)/while/body/transpose(jvp())/div" stack_frame_id=408}
  %param.1 = f32[3]{0} parameter(0)
"""


def test_the_instructions_of_a_compiled_module_are_named_with_their_source():
    assert bench_profile.op_names(HLO) == {
        "ynn_fusion.89": "jit(run)/while/body/transpose(jvp())/dot_general",
        "broadcast_add_fusion.20": "jit(run)/while/body/jvp(jit(_bernoulli))/jit(_uniform)/while/body/closed_call/add",
        "copy_bitcast_fusion.49": "jit(run)/while/body/transpose(jvp())/div",
        "param.1": "",  # no metadata: an instruction XLA made
    }


@pytest.mark.parametrize(
    "instruction, op_name, expected",
    [
        ("broadcast_add_fusion.20", "jit(run)/jvp(jit(_bernoulli))/jit(_uniform)/add", "dropout random bits"),
        ("ynn_fusion.7", "jit(run)/jit(_uniform)/dot_general", "dropout random bits"),  # the first class that matches
        ("ynn_fusion.89", "jit(run)/transpose(jvp())/dot_general", "matrix products"),
        ("dot.116", "jit(run)/transpose(jvp())/transpose", "matrix products"),  # a product fused with its transpose
        ("dot_general.270", "", "matrix products"),
        ("copy_bitcast_fusion.49", "jit(run)/transpose(jvp())/div", "copies and transposes"),
        ("transpose_copy_fusion.3", "jit(run)/mul", "copies and transposes"),
        ("bitcast_fusion.2", "jit(run)/transpose", "copies and transposes"),
        ("ynn_fusion.48", "jit(run)/transpose(jvp())/reduce_sum", "reductions"),
        ("ynn_fusion.2", "jit(run)/reduce_max", "reductions"),
        ("multiply_tanh_fusion.3", "jit(run)/tanh", "elementwise"),
        ("ynn_fusion.9", "jit(run)/reduce_sum_of_squares_free/mul", "elementwise"),
        ("while.1", "", "elementwise"),
    ],
)
def test_an_operation_is_classed_by_its_kind_and_source(instruction, op_name, expected):
    assert bench_profile.classify(instruction, op_name) == expected


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"ph": "X", "pid": 7, "tid": tid, "ts": ts, "dur": dur, "name": name, "args": {"hlo_op": name}}


def test_an_operation_keeps_only_its_own_time_on_its_thread():
    events = [
        _op("while.1", 0, 100),
        _op("dot.1", 10, 30),
        _op("add.2", 50, 20),
        _op("copy.3", 55, 5),  # inside add.2, itself inside while.1
        _op("dot.1", 100, 10),  # after while.1 ends: its own, nested in nothing
        _op("mul.4", 0, 40, tid=2),  # another thread: encloses nothing of thread 1's
        {"ph": "X", "pid": 7, "tid": 1, "ts": 0, "dur": 500, "name": "ThunkExecutor::Execute", "args": {}},
        {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
    ]
    assert bench_profile.self_times(events) == {"while.1": 50, "dot.1": 40, "add.2": 15, "copy.3": 5, "mul.4": 40}


def test_the_shares_name_every_class_and_sum_to_one():
    sources = bench_profile.op_names(HLO)
    times = {"ynn_fusion.89": 50.0, "broadcast_add_fusion.20": 30.0, "copy_bitcast_fusion.49": 20.0}
    assert bench_profile.shares(times, sources) == {
        "dropout random bits": 0.3,
        "matrix products": 0.5,
        "copies and transposes": 0.2,
        "reductions": 0.0,
        "elementwise": 0.0,
    }


def test_a_smoke_step_is_traced_and_its_time_classed_through_the_command(tmp_path):
    out = tmp_path / "p.json"
    done = subprocess.run(
        [str(REPO / "reproduce.sh"), "bench", "profile", "--quick", "--steps", "2", "--variants", "yat_b"]
        + ["--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["measured"]["command"] == "./reproduce.sh bench profile --quick --steps 2 --variants yat_b"
    found = doc["variants"]["yat_b"]
    assert list(found["shares"]) == [name for name, _ in bench_profile.CLASSES]
    assert sum(found["shares"].values()) == pytest.approx(1, abs=1e-9)
    assert (
        found["shares"]["matrix products"] > 0.01 and found["shares"]["dropout random bits"] > 0.01
    )  # a loaded machine shifts them
    assert found["unattributed"] < 0.01  # every operation traced is an instruction of the module
    assert 0 < found["op_s_per_step"] <= 2 * found["wall_s_per_step"]
    assert done.stdout.splitlines()[1].startswith("yat_b    ")


@pytest.mark.parametrize(
    "option, error",
    [
        (["--steps", "0"], "reproduce.sh bench profile: argument --steps: a number of steps is from 1 to 1000, got 0"),
        (
            ["--variants", "softmax,nope"],
            "reproduce.sh bench profile: argument --variants: unknown variant 'nope' (choose",
        ),
    ],
)
def test_a_bad_option_is_one_error_line_before_anything_is_traced(option, error):
    done = subprocess.run(
        [str(REPO / "reproduce.sh"), "bench", "profile", "--quick", *option],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {error}"), done.stderr
