import hashlib
import json
import shutil
from pathlib import Path

import pytest

from attngeom.base import fetch, files
from attngeom.base.errors import InputError

URL = fetch.BUNDLE_BASE + "kgl_blog-attngeom-qk/yat_attention.json"


@pytest.fixture()
def fake_mirror(tmp_path, monkeypatch):
    """A private mirror holding a good copy of one file, and a private cache."""
    mirror = tmp_path / "mirror"
    real = fetch.mirror_dir() / fetch.url_path(URL)
    (mirror / fetch.url_path(URL)).parent.mkdir(parents=True)
    shutil.copyfile(real, mirror / fetch.url_path(URL))
    monkeypatch.setenv("ATTNGEOM_MIRROR", str(mirror))
    monkeypatch.setenv("ATTNGEOM_CACHE", str(tmp_path / "cache"))
    return mirror


def test_fetch_from_mirror_verifies_and_caches(fake_mirror):
    path = fetch.fetch(URL)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fetch.REGISTRY[URL]
    (fake_mirror / fetch.url_path(URL)).unlink()
    assert fetch.fetch(URL) == path  # served from the cache, mirror not consulted


def test_corrupt_mirror_file_is_rejected_and_leaves_nothing(fake_mirror, tmp_path):
    (fake_mirror / fetch.url_path(URL)).write_bytes(b'{"runs": []}')
    with pytest.raises(InputError, match="sha256 mismatch"):
        fetch.fetch(URL)
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_corrupted_cache_entry_is_replaced_by_a_verified_copy(fake_mirror):
    path = fetch.fetch(URL)
    path.write_bytes(b"garbage")
    assert hashlib.sha256(fetch.fetch(URL).read_bytes()).hexdigest() == fetch.REGISTRY[URL]


def test_good_cache_survives_a_corrupt_refetch_attempt(fake_mirror):
    path = fetch.fetch(URL)
    good = path.read_bytes()
    (fake_mirror / fetch.url_path(URL)).write_bytes(b"tampered")
    assert fetch.fetch(URL).read_bytes() == good


def test_missing_from_mirror(fake_mirror):
    with pytest.raises(InputError, match="not in the mirror"):
        fetch.fetch(fetch.CORPUS_URL)


def test_interrupted_download_leaves_no_trusted_file(fake_mirror, tmp_path, monkeypatch):
    def broken(url, output_file, _pooch):
        with open(output_file, "wb") as out:
            out.write(b"half a fi")
        raise ConnectionError("connection reset")

    monkeypatch.setattr(fetch, "_mirror_downloader", lambda mirror: broken)
    with pytest.raises(InputError, match="download failed"):
        fetch.fetch(URL)
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_unregistered_url():
    with pytest.raises(InputError, match="not a registered"):
        fetch.fetch("https://example.org/x.npz")


def test_mirror_source_is_recorded_and_a_cache_hit_names_it(fake_mirror):
    path = fetch.fetch(URL)
    first = fetch.origin(path)
    assert first["source"] == "mirror" and first["mirror"] == str(fake_mirror) and first["url"] == URL
    again = fetch.origin(fetch.fetch(URL))
    assert again["source"] == "cache" and again["fetched_from"] == "mirror" and again["mirror"] == str(fake_mirror)
    assert again["fetched"] == first["fetched"]


@pytest.fixture()
def web_server(tmp_path, monkeypatch):
    """A real HTTP server on this machine holding one registered file, served to pooch's downloader."""
    import functools
    import http.server
    import threading

    root = tmp_path / "www"
    (root / "blog").mkdir(parents=True)
    shutil.copyfile(fetch.mirror_dir() / fetch.url_path(URL), root / "blog" / "yat_attention.json")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/blog/yat_attention.json"
    monkeypatch.setitem(fetch.REGISTRY, url, fetch.REGISTRY[URL])
    monkeypatch.delenv("ATTNGEOM_MIRROR", raising=False)
    monkeypatch.setenv("ATTNGEOM_CACHE", str(tmp_path / "cache"))
    yield url
    server.shutdown()


def test_network_source_then_a_cache_entry_that_keeps_where_it_came_from(web_server, tmp_path, monkeypatch):
    path = fetch.fetch(web_server)
    assert fetch.origin(path) == {"source": "network", "url": web_server, "fetched": fetch.origin(path)["fetched"]}
    cached = fetch.origin(fetch.fetch(web_server))
    assert cached["source"] == "cache" and cached["fetched_from"] == "network"
    monkeypatch.setenv("ATTNGEOM_MIRROR", str(tmp_path / "elsewhere"))
    again = fetch.origin(fetch.fetch(web_server))  # another source configured: the bytes still match their sha256
    assert again == cached and "elsewhere" not in json.dumps(again)


def test_a_cache_entry_without_its_record_says_nothing_it_does_not_know(fake_mirror):
    path = fetch.fetch(URL)
    path.with_name(path.name + fetch.SIDECAR).unlink()
    origin = fetch.origin(fetch.fetch(URL))
    assert origin == {"source": "cache", "url": URL, "cache": str(path)}


def test_a_file_given_here_is_local(tmp_path):
    assert fetch.origin(tmp_path / "geom_softmax_s0.npz") == {"source": "local"}


def test_the_report_says_where_each_input_came_from_and_on_what_cpu(fake_mirror, tmp_path):
    import os
    import platform

    from attngeom.report import markdown

    fetched = fetch.fetch(URL)
    path = fetched.with_name(fetched.name + fetch.SIDECAR)
    path.unlink()
    cached = fetch.fetch(URL)
    local = tmp_path / "local.json"
    local.write_text("{}")
    prov = markdown.provenance({p: files.sha256_file(p) for p in (cached, local)}, {})
    assert prov["sources"][str(local)] == {"source": "local"} and prov["sources"][str(cached)]["source"] == "cache"
    assert prov["machine"].endswith(f", {files.cpu_model()}, {os.cpu_count()} cores)")
    cpuinfo = Path("/proc/cpuinfo")
    if platform.system() == "Linux" and "model name" in cpuinfo.read_text():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        assert files.cpu_model() == names[0]
    doc = {
        "summary": {"verdict": "PASS", "passed": 0, "failed": 0, "skipped": 0},
        "tier": "published",
        "claims": [],
        "provenance": {**prov, "git_commit": None, "date": "d", "command": "c", "expected_sha256": {}, "versions": {}},
    }
    md = " ".join(markdown.markdown(doc, {"models": {}}).split())
    assert "from the download cache (" in md and "where it was fetched from was not recorded" in md
    assert "stale" not in md and "a local file" in md  # bytes that match their sha256 are no cause for alarm
