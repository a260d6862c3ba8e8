"""The official `kaggle` client, wrapped: authentication and the kernel calls, each failure one line.

The client's traps are handled here: `import kaggle` tries to authenticate at import time (it
prints, but no longer exits, without credentials; `KaggleApi.authenticate` itself still calls
`exit(1)`), so the import is silenced and `authenticate` called on demand; it imports `six`
without declaring it; a push whose reply carries an error (a validation error, say an unknown
machine shape) still "succeeds", so the reply is checked; accounts without phone verification or
without GPU quota get no GPU; an account runs at most two GPU sessions at once.
The service's transient failures (HTTP 429 and 5xx, dropped connections) are retried with a
bounded exponential backoff, one warning line per retry, before a call gives up; so is a 404 for
the status of a version just pushed, which the service may not know for a while.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import tenacity

from attngeom.base.errors import InputError

if TYPE_CHECKING:  # importing the client authenticates; only `connect` does it, on demand
    from kaggle.api.kaggle_api_extended import KaggleApi

MAX_LISTED_OUTPUTS = 500  # Kaggle lists no more of a kernel's output files
CREDENTIALS_HELP = (
    "run `kaggle auth login`, or create an API token at https://www.kaggle.com/settings/api "
    "(Generate New Token) and export it as KAGGLE_API_TOKEN or save it as ~/.kaggle/access_token; "
    "a legacy API key works too, as ~/.kaggle/kaggle.json (chmod 600) or KAGGLE_USERNAME and KAGGLE_KEY"
)
GPU_HELP = (
    "Kaggle gives GPUs only to phone-verified accounts with weekly GPU quota left: verify your phone at "
    "https://www.kaggle.com/settings and check the quota with `kaggle quota`"
)
SESSION_CAP = "batch gpu session count"  # "Maximum batch GPU session count of 2 reached."
RETRY_ATTEMPTS = 10  # tries per call; the waits between them double from the first to the longest
RETRY_WAIT_S = (2.0, 300.0)  # about 14 minutes in all before a call gives up
NEW_VERSION_WAIT_S = 120.0  # how long the status of a version just pushed may answer 404


class KaggleUnavailable(InputError):
    """Kaggle kept failing (HTTP 429 or 5xx, or no connection) after every retry."""


class SessionCapReached(InputError):
    """The account already runs as many GPU sessions as Kaggle allows; a push can wait for one."""


def connect() -> KaggleApi:
    """An authenticated `KaggleApi`, or an InputError that says how to get one."""
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            from kaggle.api.kaggle_api_extended import KaggleApi  # tries to authenticate at import time
    except ImportError as exc:
        raise InputError(
            f"cannot import the kaggle client ({exc}); it also needs `six`, which it does not declare: "
            "rebuild the environment from requirements.lock (delete .venv and rerun ./reproduce.sh)"
        ) from exc
    api = KaggleApi()
    # The class reads these when first imported; read them again so they follow the environment now.
    api.args = ["--local"] if os.environ.get("KAGGLE_API_ENVIRONMENT") == "LOCALHOST" else []
    if os.environ.get("KAGGLE_CONFIG_DIR"):
        api.config_dir = os.environ["KAGGLE_CONFIG_DIR"]
        api.config = os.path.join(api.config_dir, api.config_file)
    try:
        with contextlib.redirect_stdout(quiet):
            api.authenticate()
    except SystemExit:
        raise InputError(f"no usable Kaggle credentials: {CREDENTIALS_HELP}") from None
    except Exception as exc:  # the token check is a network call
        raise InputError(f"could not check the Kaggle credentials ({type(exc).__name__}: {exc}); retry") from exc
    return api


def _transient(exc: BaseException) -> bool:
    import requests

    if isinstance(exc, requests.HTTPError):
        code = exc.response.status_code if exc.response is not None else None
        return code is not None and (code == 429 or code >= 500)
    return isinstance(exc, (requests.ConnectionError, requests.Timeout))


def _describe(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return f"Kaggle answered HTTP {response.status_code}" if response is not None else f"{type(exc).__name__}"


def _retrying(what: str, stop, retry, say) -> tenacity.Retrying:
    """Tries of `what` until `stop`, while `retry(exception)`, with the exponential backoff and one warning line each."""

    def warn(attempt: tenacity.RetryCallState) -> None:
        print(f"warning: {what}: {say(attempt)} in {attempt.next_action.sleep:.0f} s", file=sys.stderr, flush=True)

    return tenacity.Retrying(
        stop=stop,
        wait=tenacity.wait_exponential(multiplier=RETRY_WAIT_S[0], max=RETRY_WAIT_S[1]),
        retry=tenacity.retry_if_exception(retry),
        before_sleep=warn,
        reraise=True,
    )


def call(what: str, fn, *args, **kwargs):
    """Run one client call, retrying transient failures; every failure becomes a one-line InputError about `what`."""
    import requests

    retrying = _retrying(
        what,
        tenacity.stop_after_attempt(RETRY_ATTEMPTS),
        _transient,
        lambda a: f"{_describe(a.outcome.exception())}; retry {a.attempt_number} of {RETRY_ATTEMPTS - 1}",
    )
    try:
        return retrying(fn, *args, **kwargs)
    except requests.HTTPError as exc:
        code = exc.response.status_code if exc.response is not None else "?"
        if code in (401, 403):
            raise InputError(f"{what}: Kaggle refused the credentials (HTTP {code}); {CREDENTIALS_HELP}") from exc
        if _transient(exc):
            raise KaggleUnavailable(f"{what}: Kaggle still answers HTTP {code} after {RETRY_ATTEMPTS} tries") from exc
        raise InputError(f"{what}: Kaggle answered HTTP {code} ({exc})") from exc
    except requests.RequestException as exc:
        raise KaggleUnavailable(
            f"{what}: cannot reach Kaggle after {RETRY_ATTEMPTS} tries ({type(exc).__name__}); check the connection"
        ) from exc
    except ValueError as exc:  # the client's own checks, and its reading of 401/403 replies
        raise InputError(f"{what}: {exc}") from exc


def username_of(api: KaggleApi) -> str:
    """The Kaggle user the credentials belong to."""
    return api.config_values.get(api.CONFIG_NAME_USER) or ""


def _hours(delta) -> str:
    return f"{delta.total_seconds() / 3600:.1f} h" if delta is not None else "?"


def check_gpu_quota(api: KaggleApi) -> float | None:
    """Say what GPU quota the service reports, and refuse to push when none is left (or there is none);
    the seconds left, None when the quota could not be read."""
    try:
        reply = call("GPU quota", api.quota_view)
    except InputError as exc:  # advisory only: the push reply has the last word
        print(f"warning: could not read the GPU quota ({exc}); pushing anyway", file=sys.stderr, flush=True)
        return None
    quota = reply.gpu_quota
    if quota is None or quota.total_time_allowed is None:
        print("GPU quota: not reported by Kaggle", flush=True)
        return None
    allowed, used = quota.total_time_allowed, quota.time_used
    refresh = reply.quota_refresh_time
    print(f"GPU quota: {_hours(used)} used of {_hours(allowed)} this week (refreshes {refresh})", flush=True)
    left = allowed.total_seconds() - (used.total_seconds() if used is not None else 0.0)
    if left <= 0:
        raise InputError(f"no GPU quota left ({_hours(allowed)} this week, next refresh {refresh}); {GPU_HELP}")
    return left


def push_kernel(api: KaggleApi, kernel_id: str, folder: Path, timeout: int, accelerator: str) -> tuple[int, str]:
    """Push the kernel folder `folder` as `kernel_id`; its new (version number, url)."""
    with contextlib.redirect_stdout(io.StringIO()):  # the client prints the reply; it is checked here
        reply = call(f"push {kernel_id}", api.kernels_push, str(folder), str(timeout), accelerator)
    if reply is None or reply.error:  # the client prints such errors and carries on; we stop
        error = "no reply" if reply is None else reply.error
        if SESSION_CAP in error.lower():
            raise SessionCapReached(f"push {kernel_id}: {error}")
        hint = f"; {GPU_HELP}" if any(w in error.lower() for w in ("phone", "gpu", "accelerator", "quota")) else ""
        raise InputError(f"push {kernel_id}: Kaggle refused it: {error}{hint}")
    return reply.version_number, reply.url


def _not_found(exc: BaseException) -> bool:
    response = getattr(exc.__cause__, "response", None)
    return isinstance(exc, InputError) and response is not None and response.status_code == 404


def kernel_status(api: KaggleApi, kernel_id: str) -> tuple[str, str | None]:
    """The kernel's state (QUEUED, RUNNING, COMPLETE, ERROR, ...) and its failure message, if any.

    Right after a push the service may answer 404 for the new version: that is retried for
    `NEW_VERSION_WAIT_S`, then it is an error like any other.
    """
    what = f"status of {kernel_id}"
    unknown = "Kaggle does not know this version yet (HTTP 404); retry"
    retrying = _retrying(what, tenacity.stop_after_delay(NEW_VERSION_WAIT_S), _not_found, lambda a: unknown)
    reply = retrying(call, what, api.kernels_status, kernel_id)
    return reply.status.name, reply.failure_message


def kernel_log(api: KaggleApi, kernel_id: str) -> str:
    """The kernel's log as plain text: Kaggle serves it as a JSON list of {stream_name, time, data} events."""
    raw = call(f"log of {kernel_id}", api.kernels_logs, kernel_id)
    try:
        events = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(events, list):
        return raw
    return "".join(str(e.get("data", "")) for e in events if isinstance(e, dict))


def download_output(api: KaggleApi, kernel_id: str, dest: Path) -> list[str]:
    """Download every output file of the kernel into `dest`; the files Kaggle listed."""
    listed, _ = call(
        f"outputs of {kernel_id}",
        api.kernels_output,
        kernel_id,
        str(dest),
        force=True,
        quiet=True,
        page_size=100,
    )
    return listed
