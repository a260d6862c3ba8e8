"""The official `kaggle` client, wrapped: authentication and the kernel calls, each failure one line.

The client's traps are handled here: `import kaggle` authenticates at import time and calls
`exit(1)` when it finds no credentials; it imports `six` without declaring it; a push whose
reply carries an error still "succeeds", so the reply is checked; accounts without phone
verification or without GPU quota get no GPU.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from attngeom.errors import InputError

if TYPE_CHECKING:  # importing the client authenticates; only `connect` does it, on demand
    from kaggle.api.kaggle_api_extended import KaggleApi

MAX_LISTED_OUTPUTS = 500  # Kaggle lists no more of a kernel's output files
CREDENTIALS_HELP = (
    "create an API token at https://www.kaggle.com/settings/api and save it as ~/.kaggle/kaggle.json "
    "(chmod 600), or export KAGGLE_USERNAME and KAGGLE_KEY, or KAGGLE_API_TOKEN"
)
GPU_HELP = (
    "Kaggle gives GPUs only to phone-verified accounts with weekly GPU quota left: verify your phone at "
    "https://www.kaggle.com/settings and check the quota with `kaggle quota`"
)


def connect() -> KaggleApi:
    """An authenticated `KaggleApi`, or an InputError that says how to get one."""
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            from kaggle.api.kaggle_api_extended import KaggleApi  # authenticates at import time
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


def call(what: str, fn, *args, **kwargs):
    """Run one client call; every failure becomes a one-line InputError about `what`."""
    import requests

    try:
        return fn(*args, **kwargs)
    except requests.HTTPError as exc:
        code = exc.response.status_code if exc.response is not None else "?"
        if code in (401, 403):
            raise InputError(f"{what}: Kaggle refused the credentials (HTTP {code}); {CREDENTIALS_HELP}") from exc
        raise InputError(f"{what}: Kaggle answered HTTP {code} ({exc}); retry later") from exc
    except requests.RequestException as exc:
        raise InputError(f"{what}: cannot reach Kaggle ({type(exc).__name__}); check the connection and retry") from exc
    except ValueError as exc:  # the client's own checks, and its reading of 401/403 replies
        raise InputError(f"{what}: {exc}") from exc


def username_of(api: KaggleApi) -> str:
    """The Kaggle user the credentials belong to."""
    return api.config_values.get(api.CONFIG_NAME_USER) or ""


def check_gpu_quota(api: KaggleApi) -> None:
    """Refuse to push when the account has no GPU time left (or none at all: no phone verification)."""
    try:
        reply = api.quota_view()
    except Exception as exc:  # advisory only: the push reply has the last word
        print(f"warning: could not read the GPU quota ({type(exc).__name__}); pushing anyway", file=sys.stderr)
        return
    quota = reply.gpu_quota
    if quota is None or quota.total_time_allowed is None:
        return
    used = quota.time_used.total_seconds() if quota.time_used is not None else 0.0
    if quota.total_time_allowed.total_seconds() - used <= 0:
        refresh = reply.quota_refresh_time
        raise InputError(f"no GPU quota left ({quota.total_time_allowed} a week, next refresh {refresh}); {GPU_HELP}")


def push_kernel(api: KaggleApi, kernel_id: str, folder: Path, timeout: int, accelerator: str) -> tuple[int, str]:
    """Push the kernel folder `folder` as `kernel_id`; its new (version number, url)."""
    reply = call(f"push {kernel_id}", api.kernels_push, str(folder), str(timeout), accelerator)
    if reply is None or reply.error:  # the client prints such errors and carries on; we stop
        error = "no reply" if reply is None else reply.error
        hint = f"; {GPU_HELP}" if any(w in error.lower() for w in ("phone", "gpu", "accelerator", "quota")) else ""
        raise InputError(f"push {kernel_id}: Kaggle refused it: {error}{hint}")
    return reply.version_number, reply.url


def kernel_status(api: KaggleApi, kernel_id: str) -> tuple[str, str | None]:
    """The kernel's state (QUEUED, RUNNING, COMPLETE, ERROR, ...) and its failure message, if any."""
    reply = call(f"status of {kernel_id}", api.kernels_status, kernel_id)
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
