"""Remote files (the corpus and the author's bundles): download or mirror, cache, verify sha256.

pooch does the downloading, caching and hash checking: a file is streamed to a temporary
name beside its cache entry and moved into place only once its sha256 matches, so an
interrupted or corrupted download never leaves a file that a later run would trust.
`ATTNGEOM_MIRROR=DIR` (or `mirror=`) replaces the network with `DIR/<host>/<path>`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pooch
import requests

from attngeom.base.errors import InputError
from attngeom.base.files import shown, write_json_atomic

CORPUS_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
BLOG_BASE = "https://raw.githubusercontent.com/mlnomadpy/blog/2f48c7fc4e18217d04dd4a582341743338b89ddf/"
BUNDLE_BASE = BLOG_BASE + "scripts/results/"
# The kernel-attention companion's quality runs: the source of the quoted quality gap.
COMPANION_URL = BLOG_BASE + "public/attention-is-a-compatibility-kernel/runs.json"
# The author's training script, as published beside the bundles (run by `fidelity`, never copied).
AUTHOR_SCRIPT_URL = BUNDLE_BASE + "kgl_blog-attngeom-qk/exp/yat_attention.py"

# URL -> sha256 of each remote file, pinned to the author's commit of the published runs.
REGISTRY: dict[str, str] = {
    CORPUS_URL: "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    COMPANION_URL: "86b2998c95d2b5e0840f771672a8d3284403359688159f93ed9b89a06a6f9b20",
    **{
        BUNDLE_BASE + name: sha
        for name, sha in {
            "kgl_blog-attngeom-qk/attn_softmax_s0.npz": "557dfc6a5e3a7d52207159d5fe160b5b9bae9748a0d92cbdf7b086d33559e317",
            "kgl_blog-attngeom-qk/attn_yat_b_s0.npz": "14ac5a8107e072e75b6e19f7b64181d4e071b7b5af9da3ed361864b5683e6f82",
            "kgl_blog-attngeom-qk/geom_softmax_s0.npz": "b886415deb71b1cd2da7dfbe3fd08a21d0843b332c7294883d1a87d8b8031307",
            "kgl_blog-attngeom-qk/geom_yat_b_s0.npz": "68a9af316a9c9c8cdb040b367baffe3043f70bf1b441961d0f6fdbb176fb94c1",
            "kgl_blog-attngeom-qk/yat_attention.json": "71cc7efe088c4b430befe7d960f8417a516ea953d11420682ce46122cd46cbbe",
            "kgl_blog-attngeom-goat/attn_goat_v_s0.npz": "b3809d171a5b834688d220d30563c69e1adedebba404e1ca8a516ad9187bcaa0",
            "kgl_blog-attngeom-goat/geom_goat_v_s0.npz": "adc300d195f6659e41fb3e35bb82fe7b7e3c41aafe36af4b57de9f90cecb9a4d",
            "kgl_blog-attngeom-goat/yat_attention.json": "59799c566f3b55f251047cf22d7cb71b564ad55c3958cf37b808d206b50da9a2",
            "kgl_blog-yatattn-b-telem/attn_yat_b_s0.npz": "3e28534c509583de9df72f00faba9f256c817ccfcc6428f67cacb10dd6430963",
            "kgl_blog-yatattn-b-telem/yat_attention.json": "8694be8c97e97e6e3abab5c00e30779d696233057cf85813da666252a2291804",
            "kgl_blog-goat-telem/attn_goat_v_s0.npz": "2bb5f3ca31d5365382b64e6b4b716a2fb86dff273f93f68bad1d600711014a8c",
            "kgl_blog-goat-telem/yat_attention.json": "cdaa2d4f812f829fcb4267320edcfb68d8d62129fef3cdf5fa3f3f17cbc267b2",
            "kgl_blog-attngeom-qk/exp/yat_attention.py": "210b97fddb95e0bd8a30ac5bd40ce251757e1f0ca0b60ee5217bd2076c2ba68b",
        }.items()
    },
}

pooch.get_logger().setLevel("WARNING")

PUBLISHED_BUNDLES = ("kgl_blog-attngeom-qk", "kgl_blog-attngeom-goat")
TELEMETRY_BUNDLES = ("kgl_blog-yatattn-b-telem", "kgl_blog-goat-telem")


def cache_dir() -> Path:
    """Where verified downloads are kept: `ATTNGEOM_CACHE`, else the user's cache folder."""
    return Path(os.environ.get("ATTNGEOM_CACHE") or pooch.os_cache("attngeom"))


def mirror_dir() -> Path | None:
    """The local mirror named by `ATTNGEOM_MIRROR`, if any."""
    value = os.environ.get("ATTNGEOM_MIRROR")
    return Path(value).expanduser().resolve() if value else None


def url_path(url: str) -> Path:
    """`<host>/<path>` of a URL: its place in a mirror and in the cache."""
    parts = urlparse(url)
    return Path(parts.netloc) / parts.path.lstrip("/")


def _mirror_downloader(mirror: Path):
    def download(url: str, output_file, _pooch) -> None:
        source = mirror / url_path(url)
        if not source.is_file():
            raise InputError(f"{source}: not in the mirror (ATTNGEOM_MIRROR={mirror})")
        try:
            src = open(source, "rb")  # closed below; its errors are the mirror's, not the cache's
        except OSError as exc:
            raise InputError(f"{source}: cannot read the mirror's copy ({exc.strerror or exc})") from exc
        with src:
            if hasattr(output_file, "write"):
                shutil.copyfileobj(src, output_file)
            else:
                with open(output_file, "wb") as out:
                    shutil.copyfileobj(src, out)

    return download


# Where each file this process fetched came from, by local path (see `origin`).
ORIGINS: dict[Path, dict] = {}
SIDECAR = ".source.json"


def _sidecar(path: Path) -> Path:
    """The small file beside a cache entry that records where and when it was fetched."""
    return path.with_name(path.name + SIDECAR)


def _read_sidecar(path: Path) -> dict | None:
    try:
        record = json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("source") in ("network", "mirror") else None


def _source(url: str, mirror: Path | None) -> dict:
    return {"source": "mirror", "mirror": str(mirror)} if mirror else {"source": "network", "url": url}


def _cache_origin(url: str, path: Path) -> dict:
    """A cache hit: where and when it was fetched, as recorded beside it (nothing for a file an earlier
    version fetched). Its bytes matched the pinned sha256 whichever source filled it, so where that
    was is provenance, not a warning."""
    recorded = _read_sidecar(path)
    origin = {"source": "cache", "url": url, "cache": str(path)}
    if recorded is not None:
        origin.update(fetched=recorded.get("fetched"), fetched_from=recorded["source"], mirror=recorded.get("mirror"))
    return origin


def _cache_error(path: Path, exc: OSError | InputError) -> InputError:
    """A cache that cannot hold a file (a file or a folder in its place, read-only, full): its path and the cause."""
    cause = getattr(exc, "strerror", None) or str(exc).removeprefix(f"{shown(path)}: ")
    return InputError(
        f"{shown(path)}: the download cache cannot hold {path.name} ({cause}); "
        f"fix or free it, or set ATTNGEOM_CACHE to another folder (now {shown(cache_dir())})"
    )


def fetch(url: str, mirror: Path | None = None, progress: bool = False) -> Path:
    """Return a local, sha256-verified copy of a registered remote file; `origin` says where it came from."""
    if url not in REGISTRY:
        raise InputError(f"{url}: not a registered remote file")
    mirror = mirror if mirror is not None else mirror_dir()
    target = cache_dir() / url_path(url)
    download = _mirror_downloader(mirror) if mirror else pooch.HTTPDownloader(progressbar=progress)
    downloaded = []

    def downloader(*args) -> None:
        download(*args)
        downloaded.append(True)

    try:
        path = Path(
            pooch.retrieve(
                url,
                known_hash=f"sha256:{REGISTRY[url]}",
                fname=target.name,
                path=target.parent,
                downloader=downloader,
            )
        )
    except InputError:
        raise
    except ValueError as exc:  # pooch's hash mismatch
        raise InputError(f"{url}: sha256 mismatch, file rejected ({str(exc).splitlines()[0]})") from exc
    except OSError as exc:
        if isinstance(
            exc, (requests.RequestException, ConnectionError, TimeoutError)
        ):  # the network's, not the cache's
            raise _download_failed(url, exc) from exc
        raise _cache_error(target, exc) from exc
    except Exception as exc:  # the network's other failures
        raise _download_failed(url, exc) from exc
    if downloaded:
        record = {
            **_source(url, mirror),
            "url": url,
            "fetched": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        try:
            write_json_atomic(_sidecar(path), record)
        except (OSError, InputError) as exc:  # InputError: a folder or a device in the record's place
            raise _cache_error(_sidecar(path), exc) from exc
        ORIGINS[path] = record
    else:
        ORIGINS[path] = _cache_origin(url, path)
    return path


def _download_failed(url: str, exc: Exception) -> InputError:
    return InputError(
        f"{url}: download failed ({type(exc).__name__}); check the network, "
        "or set ATTNGEOM_MIRROR=DIR to a local mirror laid out as DIR/<host>/<path>"
    )


def origin(path: Path) -> dict:
    """Where an input came from: network (with the URL), mirror (with the folder), cache (with the
    original source and when it was fetched, where recorded) or local (a file given here)."""
    return ORIGINS.get(Path(path), {"source": "local"})


def fetch_bundles(names: tuple[str, ...] = PUBLISHED_BUNDLES, mirror: Path | None = None) -> Path:
    """Fetch every file of the named published bundles (not their `exp/` sources); return their folder."""
    for url in REGISTRY:
        if any(
            url.startswith(BUNDLE_BASE + name + "/") and "/" not in url.removeprefix(BUNDLE_BASE + name + "/")
            for name in names
        ):
            fetch(url, mirror)
    return cache_dir() / url_path(BUNDLE_BASE)


def fetch_corpus(mirror: Path | None = None) -> Path:
    """Fetch the Tiny Shakespeare corpus."""
    return fetch(CORPUS_URL, mirror)


def fetch_companion(mirror: Path | None = None) -> Path:
    """Fetch the kernel-attention companion's runs.json (three seeds per mechanism)."""
    return fetch(COMPANION_URL, mirror)


def fetch_author_script(mirror: Path | None = None) -> Path:
    """Fetch the author's training script (`yat_attention.py` at the pinned commit)."""
    return fetch(AUTHOR_SCRIPT_URL, mirror)
