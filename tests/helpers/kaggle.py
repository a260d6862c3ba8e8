"""A fake Kaggle API server on 127.0.0.1 for driving the real `kaggle` client in tests.

It answers the kagglesdk RPCs the backend uses (`POST /api/v1/<service>/<Rpc>` with a JSON
body) and serves each output file from the URL its listing gives. Requests may arrive either
directly or through `http_proxy` (then the request line carries an absolute URL); both work.
Each kernel walks through a scripted list of states, one per status poll, and can be told
to fail its push, end in ERROR, or serve arbitrary output bytes.

It behaves like the real service where that matters to a run: every push is a new version, and
for a while after a push the kernel without a version label still answers for the previous
version (`stale_polls`), and the new version's own status may answer 404 for a while
(`missing_after_push`); a request for an unknown kernel is refused with 403, one for a version
label the kernel does not have with 404; a push names a machine shape from the service's list of
accelerators and a session timeout of at most 12 h, or its reply carries the validation error in
its `error` field; replies can be scripted to fail with 429 or 503 before succeeding (`fail_next`); an account runs at most
`session_cap` GPU sessions at once, counting sessions of other notebooks (`outside_sessions`,
one fewer after each refused push); credentials are a legacy key (HTTP Basic) or an API token
(HTTP Bearer, checked through the token introspection RPC).
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import json
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import numpy as np

from attngeom.backends.kaggle_kernel import OUTPUT_DIR
from attngeom.base.errors import InputError
from attngeom.base.variants import variant as variant_spec
from attngeom.bundles.layout import RUN_JSON, write_attn_npz, write_geom_npz
from attngeom.commands import kaggle as kaggle_command_module

RPC_PREFIX = "/api/v1/"
# The machine shapes the service accepts (kaggle-cli, docs/kernels.md: "Accelerators available as of Feb 2026").
ACCELERATORS = (
    "NvidiaTeslaP100",
    "TpuV38",
    "NvidiaTeslaT4",
    "NvidiaTeslaT4Highmem",
    "Tpu1VmV38",
    "NvidiaTeslaA100",
    "NvidiaL4",
    "TpuV5E8",
    "NvidiaL4X1",
    "TpuV6E8",
    "NvidiaH100",
    "NvidiaRtxPro6000",
)
MAX_SESSION_S = 12 * 3600  # Kaggle's longest session
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@dataclass
class FakeKernel:
    """What the server knows about one kernel (`owner/slug`)."""

    states: list[str] = field(default_factory=lambda: ["QUEUED", "RUNNING", "COMPLETE"])
    failure_message: str | None = None
    log: str = ""
    outputs: dict[str, bytes] = field(default_factory=dict)
    pushes: list[dict] = field(default_factory=list)
    polls: int = 0
    previous: dict | None = None  # the last version before the latest push: its final state, outputs and log
    stale_polls: int = 0  # unlabelled requests still answered for `previous`
    missing_polls: int = 0  # status requests for the latest version still answered 404

    def running(self) -> bool:
        """Whether the latest version holds a GPU session (it has not reported its last state yet)."""
        return bool(self.pushes) and self.polls < len(self.states)


class FakeKaggle:
    """The server and its state; use as a context manager."""

    def __init__(self, username: str = "reviewer", key: str = "secret-key", token: str = "api-token") -> None:
        self.username, self.key, self.token = username, key, token
        self.kernels: dict[str, FakeKernel] = {}
        self.push_error: str | None = None
        self.on_push = None  # optional callable(slug, request_json) run at push time
        self.gpu_hours_left = 30.0
        self.stale_after_push = 0  # unlabelled requests answered for the previous version after each push
        self.missing_after_push = 0  # status requests for the new version answered 404 after each push
        self.fail_next: list[int] = []  # HTTP statuses the next RPCs answer with, one each, before serving
        self.session_cap = 2
        self.outside_sessions = 0  # GPU sessions of the account's other notebooks
        self.auth_seen: list[str] = []  # the scheme of each authorised request: "Basic" or "Bearer"
        self.requests: list[tuple[str, str]] = []  # (client host, request target as sent: a path, or a URL via a proxy)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeKaggle:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def kernel(self, slug: str) -> FakeKernel:
        """The kernel `owner/slug`, created with default behaviour on first use."""
        with self._lock:
            return self.kernels.setdefault(slug, FakeKernel())

    # --- RPC handlers: request JSON in, (HTTP status, response JSON) out ---

    def save_kernel(self, body: dict) -> tuple[int, dict]:
        if self.push_error:
            return 200, {"error": self.push_error}
        shape, timeout = body.get("machineShape"), int(body.get("sessionTimeoutSeconds") or 0)
        if shape and shape not in ACCELERATORS:  # validation errors come back in the reply, with HTTP 200
            return 200, {"error": f"Invalid machine shape '{shape}'"}
        if timeout > MAX_SESSION_S:
            return 200, {"error": f"Session timeout {timeout} s exceeds the maximum of {MAX_SESSION_S} s"}
        running = self.outside_sessions + sum(k.running() for k in self.kernels.values())
        if running >= self.session_cap:
            self.outside_sessions = max(0, self.outside_sessions - 1)
            return 200, {"error": f"Maximum batch GPU session count of {self.session_cap} reached."}
        slug = body.get("slug", "")
        kernel = self.kernel(slug)
        if kernel.pushes:
            kernel.previous = {"state": kernel.states[-1], "outputs": kernel.outputs, "log": kernel.log}
            kernel.stale_polls = self.stale_after_push
        kernel.pushes.append(body)
        kernel.polls, kernel.missing_polls = 0, self.missing_after_push
        if self.on_push is not None:
            self.on_push(slug, body)
        return 200, {"ref": f"/code/{slug}", "url": f"{self.url}/code/{slug}", "versionNumber": len(kernel.pushes)}

    def _version(self, body: dict) -> tuple[int, FakeKernel | None, dict | None]:
        """The HTTP status, the kernel a request names, and the previous version's record when that one answers."""
        kernel = self.kernels.get(f"{body.get('userName')}/{body.get('kernelSlug')}")
        label = body.get("versionLabel")
        if kernel is None or not kernel.pushes:
            return 403, None, None
        if label:
            if label == f"v{len(kernel.pushes) - 1}":
                return 200, kernel, kernel.previous
            return (200, kernel, None) if label == f"v{len(kernel.pushes)}" else (404, None, None)
        if kernel.stale_polls > 0:
            kernel.stale_polls -= 1
            return 200, kernel, kernel.previous
        return 200, kernel, None

    @staticmethod
    def _refused(status: int, body: dict) -> tuple[int, dict]:
        slug = f"{body.get('userName')}/{body.get('kernelSlug')}"
        if status == 404:
            return 404, {"code": 404, "message": f"Version {body.get('versionLabel')} of {slug} was not found"}
        return 403, {"code": 403, "message": f"Permission 'kernels.get' was denied for {slug}"}

    def get_kernel_session_status(self, body: dict) -> tuple[int, dict]:
        status, kernel, previous = self._version(body)
        if kernel is None:
            return self._refused(status, body)
        if previous is not None:
            return 200, {"status": previous["state"]}
        if kernel.missing_polls > 0:  # the service does not know the version just pushed yet
            kernel.missing_polls -= 1
            return self._refused(404, body)
        state = kernel.states[min(kernel.polls, len(kernel.states) - 1)]
        kernel.polls += 1
        reply = {"status": state}
        if state == "ERROR" and kernel.failure_message:
            reply["failureMessage"] = kernel.failure_message
        return 200, reply

    def list_kernel_session_output(self, body: dict) -> tuple[int, dict]:
        status, kernel, previous = self._version(body)
        if kernel is None:
            return self._refused(status, body)
        slug = f"{body.get('userName')}/{body.get('kernelSlug')}"
        outputs, log = (previous["outputs"], previous["log"]) if previous is not None else (kernel.outputs, kernel.log)
        names = sorted(outputs)
        start = int(body.get("pageToken") or 0)
        size = int(body.get("pageSize") or 20)
        page = names[start : start + size]
        old = "/old" if previous is not None else ""
        files = [{"fileName": n, "url": f"{self.url}/files{old}/{quote(slug, safe='')}/{quote(n)}"} for n in page]
        reply: dict = {"files": files, "log": log}
        if start + size < len(names):
            reply["nextPageToken"] = str(start + size)
        return 200, reply

    def introspect_token(self, body: dict) -> tuple[int, dict]:
        active = body.get("token") == self.token
        return 200, {"active": active, "username": self.username if active else ""}

    def get_accelerator_quota_statistics(self, body: dict) -> tuple[int, dict]:
        return 200, {
            "quotaRefreshTime": "2030-01-01T00:00:00.000Z",
            "gpuQuota": {"timeUsed": f"{int((30 - self.gpu_hours_left) * 3600)}s", "totalTimeAllowed": "108000s"},
        }

    def download(self, slug: str, name: str, old: bool = False) -> bytes | None:
        kernel = self.kernels.get(slug)
        if kernel is None or (old and kernel.previous is None):
            return None
        return (kernel.previous["outputs"] if old else kernel.outputs).get(name)


def point_client_at(fake: FakeKaggle, monkeypatch, home: Path) -> None:
    """Route the real client to `fake` in this process, with its credentials and a private home."""
    from kagglesdk import kaggle_env

    monkeypatch.setitem(kaggle_env._env_to_endpoint, kaggle_env.KaggleEnv.LOCAL, fake.url)
    for var in ("KAGGLE_API_TOKEN", *PROXY_VARS):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KAGGLE_API_ENVIRONMENT", "LOCALHOST")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(home / ".kaggle"))
    monkeypatch.setenv("KAGGLE_USERNAME", fake.username)
    monkeypatch.setenv("KAGGLE_KEY", fake.key)


RPCS = {
    "kernels.KernelsApiService/SaveKernel": FakeKaggle.save_kernel,
    "kernels.KernelsApiService/GetKernelSessionStatus": FakeKaggle.get_kernel_session_status,
    "kernels.KernelsApiService/ListKernelSessionOutput": FakeKaggle.list_kernel_session_output,
    "kernels.KernelsApiService/GetAcceleratorQuotaStatistics": FakeKaggle.get_accelerator_quota_statistics,
    "security.OAuthService/IntrospectToken": FakeKaggle.introspect_token,
}


def _handler(fake: FakeKaggle) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self) -> bool:
            basic = base64.b64encode(f"{fake.username}:{fake.key}".encode()).decode()
            given = self.headers.get("Authorization", "")
            if given in (f"Basic {basic}", f"Bearer {fake.token}"):
                fake.auth_seen.append(given.split()[0])
                return True
            return False

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            fake.requests.append((self.client_address[0], self.path))
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            rpc = RPCS.get(path[len(RPC_PREFIX) :]) if path.startswith(RPC_PREFIX) else None
            if rpc is None:
                status, reply = 404, {"code": 404, "message": f"no such RPC {path}"}
            elif fake.fail_next:
                status = fake.fail_next.pop(0)
                reply = {"code": status, "message": "Too Many Requests" if status == 429 else "Service Unavailable"}
            elif not self._authorised() and rpc is not FakeKaggle.introspect_token:  # it judges the token itself
                status, reply = 401, {"code": 401, "message": "Unauthenticated"}
            else:
                status, reply = rpc(fake, body)
            self._reply(status, json.dumps(reply).encode())

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            fake.requests.append((self.client_address[0], self.path))
            old = path.startswith("/files/old/")
            parts = path.replace("/files/old/", "/files/", 1).split("/", 3)
            data = (
                fake.download(unquote(parts[2]), unquote(parts[3]), old)
                if len(parts) == 4 and parts[1] == "files"
                else None
            )
            if data is None:
                self._reply(404, b"not found", "text/plain")
            else:
                self._reply(200, data, "application/octet-stream")

    return Handler


def settings_of(script: str) -> dict:
    """The SETTINGS a built kernel script carries."""
    for node in ast.parse(script).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SETTINGS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("no SETTINGS in the kernel script")


def kaggle_command(*argv: str) -> tuple[int, str]:
    """Run `kaggle ...` in process: (exit status, the error line or '')."""
    parser = argparse.ArgumentParser()
    kaggle_command_module.register(parser.add_subparsers())
    args = parser.parse_args(["kaggle", *argv])
    try:
        return args.func(args), ""
    except InputError as exc:
        return 2, str(exc)


def synthetic_output(
    bundle: str, variants: tuple[str, ...], seed: int, corrupt: str | None = None, salt: int = 0, run_id: str = ""
) -> dict[str, bytes]:
    """A kernel's output made up for a test: a bundle in the original format plus its manifest.

    The maps are random causal attention rows (layer x head x 128 x 128, float16); `corrupt`
    names a file whose bytes change after the manifest was written; `run_id` is stamped into the
    manifest as the kernel script does.
    """
    L, H, T, D = 6, 4, 128, 48
    rng = np.random.default_rng([seed, salt, len(variants)])
    tokens_T = rng.integers(0, 65, T).astype(np.int32)
    runs, files = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for variant in variants:
            keep_TT = np.tril(np.ones((T, T), bool), k=-1 if variant_spec(variant).strict_mask else 0)
            maps = {}
            for step in (0, 1200, 6000, 11999):
                w_LHTT = rng.random((L, H, T, T)) * keep_TT
                maps[step] = w_LHTT / np.maximum(w_LHTT.sum(-1, keepdims=True), 1e-9)
            write_attn_npz(folder / f"attn_{variant}_s{seed}.npz", tokens_T, maps)
            q_LHTD, k_LHTD = rng.normal(size=(2, L, H, T, D))
            write_geom_npz(folder / f"geom_{variant}_s{seed}.npz", tokens_T, q_LHTD, k_LHTD, maps[11999])
            run = {
                "variant": variant,
                "seed": seed,
                "best_val": 1.5,
                "bpc": 1.5 / np.log(2),
                "curve": [{"step": 500, "val": 1.5}],
                "score_max": 1.0,
                "telemetry_prompt": "synthetic",
            }
            if variant_spec(variant).kernel:
                run["b_learned"] = run["eps_learned"] = np.full((L, H), 0.5).tolist()
            runs.append(run)
        (folder / RUN_JSON).write_text(json.dumps({"summary": {}, "runs": runs, "cfg": {"STEPS": 12000}}))
        for path in sorted(folder.iterdir()):
            files[f"{bundle}/{path.name}"] = path.read_bytes()
    manifest = {
        "completed": True,
        "config": {"preset": "paper", "variants": list(variants), "seeds": [seed], "train": {"steps": 12000}},
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    manifest["kaggle"] = {"run_id": run_id, "bundle": bundle, "seed": seed}
    outputs = {f"{OUTPUT_DIR}/{name}": data for name, data in files.items()}
    outputs[f"{OUTPUT_DIR}/manifest.json"] = json.dumps(manifest).encode()
    if corrupt is not None:
        name = f"{OUTPUT_DIR}/{bundle}/{corrupt}"
        outputs[name] = outputs[name][:-1] + bytes([outputs[name][-1] ^ 1])
    return outputs
