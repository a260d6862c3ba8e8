import hashlib
import shutil

import pytest

from attngeom import fetch
from attngeom.errors import InputError

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
