"""The Kaggle backend against the service's awkward behaviours, each driven through the real client.

A re-pushed kernel whose unlabelled status is still the old version's COMPLETE, a new version
whose status answers 404 for a while, replies of 429 and 503 before success, the account's cap of
two GPU sessions, 403 for a kernel the service does not show and 404 for a version it does not
have, validation errors (machine shape, session timeout) in the push reply's `error` field, and
API-token (Bearer) credentials next to the legacy key (Basic).
"""

from __future__ import annotations

import json

import pytest
from helpers.kaggle import FakeKaggle, settings_of, synthetic_output
from helpers.kaggle import kaggle_command as kaggle

from attngeom.backends import kaggle as kaggle_backend
from attngeom.backends import kaggle_client
from attngeom.backends.kaggle_kernel import OUTPUT_DIR
from attngeom.training.runs import require_complete

GOAT = "reviewer/attngeom-goat-s0"


@pytest.fixture
def fake(fake_kaggle, monkeypatch):
    """The fake Kaggle (conftest's `fake_kaggle`) whose kernels produce a synthetic bundle stamped with the
    pushing run's id; a pulled run is not judged."""
    monkeypatch.setattr(kaggle_backend, "judge", lambda run, state: 0)

    def produce(slug: str, request: dict) -> None:
        run_id = settings_of(request["text"])["RUN_ID"]
        fake_kaggle.kernel(slug).outputs = synthetic_output("attngeom-goat", ("goat_v",), 0, run_id=run_id)

    fake_kaggle.on_push = produce
    return fake_kaggle


def run_id_of(run) -> str:
    return json.loads((run / kaggle_backend.STATE_FILE).read_text())["run_id"]


def pulled_manifest(run) -> dict:
    return require_complete(run / "outputs" / "attngeom-goat-s0" / OUTPUT_DIR)


def test_a_re_push_reads_its_own_version_not_the_stale_complete(fake, tmp_path):
    assert kaggle("run", "--run", "one", "--poll", "0.001", "--bundles", "attngeom-goat") == (0, "")
    fake.stale_after_push = 100  # the unlabelled kernel answers for version 1 (COMPLETE) all along
    assert kaggle("run", "--run", "two", "--poll", "0.001", "--bundles", "attngeom-goat") == (0, "")
    assert pulled_manifest(tmp_path / "two")["kaggle"]["run_id"] == run_id_of(tmp_path / "two")
    assert run_id_of(tmp_path / "two") != run_id_of(tmp_path / "one")
    assert fake.kernels[GOAT].polls == 3  # version 2 itself was polled through QUEUED, RUNNING, COMPLETE
    state = json.loads((tmp_path / "two" / kaggle_backend.STATE_FILE).read_text())
    assert state["kernels"][0]["version"] == 2


def test_output_of_another_run_is_refused(fake, tmp_path):
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    fake.on_push = lambda slug, request: None
    fake.kernel(GOAT).outputs = synthetic_output("attngeom-goat", ("goat_v",), 0, run_id="0" * 32)
    status, error = kaggle("run", "--run", "r", "--poll", "0.001")
    assert status == 2 and "made by another run (run id 00000000" in error and run_id_of(tmp_path / "r") in error
    assert not (tmp_path / "r" / "outputs" / "attngeom-goat-s0").exists()


def test_429_and_503_are_retried_then_succeed(fake, tmp_path, capsys):
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    fake.fail_next = [429, 503]  # the quota call meets them
    assert kaggle("push", "--run", "r") == (0, "")
    err = capsys.readouterr().err
    assert "warning: GPU quota: Kaggle answered HTTP 429; retry 1 of 9" in err
    assert "warning: GPU quota: Kaggle answered HTTP 503; retry 2 of 9" in err
    assert len(fake.kernels[GOAT].pushes) == 1 and "could not read the GPU quota" not in err
    fake.fail_next = [503, 429, 502]  # then the status polls and the output listing
    assert kaggle("run", "--run", "r", "--poll", "0.001") == (0, "")
    assert "status of reviewer/attngeom-goat-s0/1: Kaggle answered HTTP 502; retry 3 of 9" in capsys.readouterr().err
    assert pulled_manifest(tmp_path / "r")["completed"]


def test_retries_are_bounded_and_say_how_to_continue(fake, tmp_path, capsys):
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    assert kaggle("push", "--run", "r") == (0, "")
    capsys.readouterr()
    fake.fail_next = [503] * kaggle_client.RETRY_ATTEMPTS
    status, error = kaggle("status", "--run", "r")
    assert status == 2 and f"still answers HTTP 503 after {kaggle_client.RETRY_ATTEMPTS} tries" in error
    assert "`./reproduce.sh kaggle status --out r`" in error and "`kaggle pull --out r` continue it" in error
    assert capsys.readouterr().err.count("warning: ") == kaggle_client.RETRY_ATTEMPTS - 1


def test_no_connection_is_retried_then_one_line(fake, monkeypatch, tmp_path):
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    assert kaggle("push", "--run", "r") == (0, "")
    with FakeKaggle() as gone:
        url = gone.url
    from kagglesdk import kaggle_env

    monkeypatch.setitem(kaggle_env._env_to_endpoint, kaggle_env.KaggleEnv.LOCAL, url)  # nothing listens there
    status, error = kaggle("status", "--run", "r")
    assert status == 2 and "cannot reach Kaggle after" in error and "continue it" in error


def test_the_two_session_cap_waits_for_a_free_session(fake, tmp_path, capsys):
    fake.outside_sessions = 3  # other notebooks hold both sessions; one ends at each refused push
    assert kaggle("run", "--run", "r", "--poll", "0.001", "--bundles", "attngeom-goat") == (0, "")
    out = capsys.readouterr().out
    assert out.count("Maximum batch GPU session count of 2 reached. Waiting for one") == 2
    assert "phone" not in out.lower() and pulled_manifest(tmp_path / "r")["completed"]
    # `push` on its own does not wait: it says why nothing was pushed, and how to go on.
    fake.outside_sessions = 5
    assert kaggle("build", "--run", "p", "--bundles", "attngeom-goat") == (0, "")
    status, error = kaggle("push", "--run", "p")
    assert status == 2 and "GPU sessions" in error and "kaggle run --out p" in error and "phone" not in error


def test_a_kernel_the_service_does_not_show_is_403_not_a_credentials_error(fake, tmp_path):
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    assert kaggle("push", "--run", "r") == (0, "")
    del fake.kernels[GOAT]  # deleted on the site, or never visible to this account
    status, error = kaggle("status", "--run", "r")
    assert status == 2 and "Cannot access kernel 'reviewer/attngeom-goat-s0/1'" in error
    assert "refused the credentials" not in error


def test_a_new_version_unknown_for_a_while_is_waited_for(fake, tmp_path, capsys):
    fake.missing_after_push = 2
    assert kaggle("run", "--run", "r", "--poll", "0.001", "--bundles", "attngeom-goat") == (0, "")
    err = capsys.readouterr().err
    assert err.count("Kaggle does not know this version yet (HTTP 404)") == 2
    assert pulled_manifest(tmp_path / "r")["completed"]


def test_a_version_the_kernel_does_not_have_is_404_within_a_bounded_wait(fake, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(kaggle_client, "NEW_VERSION_WAIT_S", 0.05)
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    assert kaggle("push", "--run", "r") == (0, "")
    state_file = tmp_path / "r" / kaggle_backend.STATE_FILE
    state = json.loads(state_file.read_text())
    state["kernels"][0]["version"] = 7  # a label the kernel does not have
    state_file.write_text(json.dumps(state))
    status, error = kaggle("status", "--run", "r")
    assert status == 2 and "HTTP 404" in error and "Cannot access" not in error and "credentials" not in error


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        (("--accelerator", "NvidiaTeslaK80"), "Invalid machine shape 'NvidiaTeslaK80'"),
        (("--accelerator", "NvidiaTeslaP4"), "Invalid machine shape 'NvidiaTeslaP4'"),
    ],
)
def test_a_validation_error_in_the_push_reply_stops_the_push(fake, option, refusal):
    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    status, error = kaggle("push", "--run", "r", *option)
    assert status == 2 and "Kaggle refused it" in error and refusal in error
    assert not fake.kernels.get(GOAT, None) or not fake.kernels[GOAT].pushes


def test_a_kernel_time_kaggle_would_refuse_is_refused_before_any_push(fake, capsys):
    from attngeom import cli

    assert kaggle("build", "--run", "r", "--bundles", "attngeom-goat") == (0, "")
    assert cli.main(["kaggle", "push", "--out", "r", "--timeout", "43201"]) == 2
    assert "from 1 to 43200, got 43201" in capsys.readouterr().err
    assert not fake.kernels.get(GOAT, None) or not fake.kernels[GOAT].pushes


@pytest.mark.parametrize("where", ["environment", "file"])
def test_an_api_token_authenticates_with_bearer(fake, monkeypatch, tmp_path, capsys, where):
    monkeypatch.delenv("KAGGLE_USERNAME")
    monkeypatch.delenv("KAGGLE_KEY")
    if where == "environment":
        monkeypatch.setenv("KAGGLE_API_TOKEN", fake.token)
    else:
        (tmp_path / "home" / ".kaggle").mkdir(parents=True)
        (tmp_path / "home" / ".kaggle" / "access_token").write_text(fake.token + "\n")
    assert kaggle("run", "--run", "r", "--poll", "0.001", "--bundles", "attngeom-goat") == (0, "")
    assert set(fake.auth_seen) == {"Bearer"} and pulled_manifest(tmp_path / "r")["completed"]
    assert "GPU quota: 0.0 h used of 30.0 h this week" in capsys.readouterr().out


def test_a_wrong_token_and_no_key_says_how_to_authenticate(fake, monkeypatch):
    monkeypatch.delenv("KAGGLE_USERNAME")
    monkeypatch.delenv("KAGGLE_KEY")
    monkeypatch.setenv("KAGGLE_API_TOKEN", "not-the-token")
    status, error = kaggle("run", "--run", "r", "--bundles", "attngeom-goat")
    assert status == 2 and "no usable Kaggle credentials" in error
    for way in ("kaggle auth login", "KAGGLE_API_TOKEN", "~/.kaggle/access_token", "kaggle.json", "KAGGLE_KEY"):
        assert way in error
    assert set(fake.auth_seen) <= {"Bearer"} and not fake.kernels
