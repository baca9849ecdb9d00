"""The stretch corpora: tiny Shakespeare (checksummed, cached, never fetched here) and the stdlib Python corpus."""

import shutil

import pytest

from helpers import SHAKESPEARE, needs_shakespeare
from helpers import SHARED_DATA as SHARED
from stretch import data


@pytest.fixture(autouse=True)
def no_network(monkeypatch, tmp_path):
    """No test reaches the network, and none sees the developer's cache or data folder."""

    def refuse(url, dest):
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(data, "download", refuse)
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_manifest_matches_the_issue():
    meta = data.source()
    assert meta["sha256"] == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    assert meta["size"] == 1_115_394
    assert meta["url"].startswith("https://raw.githubusercontent.com/karpathy/char-rnn/")


@needs_shakespeare
@pytest.mark.parametrize("how", ["data_dir", "env"])
def test_an_existing_copy_is_used_without_download(monkeypatch, how):
    if how == "env":
        monkeypatch.setenv(data.ENV_VAR, str(SHARED))
    path = data.shakespeare_path(SHARED if how == "data_dir" else None)
    assert path == SHAKESPEARE, f"--data-dir / ${data.ENV_VAR} should point straight at the copy, got {path}"


@needs_shakespeare
def test_round_trip_and_split_sizes():
    ds = data.load_dataset("shakespeare", SHARED)
    text = SHAKESPEARE.read_text()
    assert ds.tokenizer.vocab_size == 65, "tiny Shakespeare has 65 distinct characters"
    assert ds.tokenizer.decode(ds.train.tolist() + ds.val.tolist()) == text, "encode then decode must give the text"
    assert len(ds.train) == int(0.9 * len(text)) and len(ds.train) + len(ds.val) == len(text), (
        "the split is the first 90% for training, the last 10% for validation, nothing lost"
    )


def test_missing_file_names_the_path_and_the_way_out(tmp_path):
    with pytest.raises(data.DataError) as err:
        data.shakespeare_path(tmp_path)
    message = str(err.value)
    assert str(tmp_path / "tinyshakespeare.txt") in message and "not found" in message
    assert data.source()["url"] in message, "the message should say where the file comes from"


def test_checksum_mismatch_is_refused(tmp_path):
    (tmp_path / "tinyshakespeare.txt").write_text("To be, or not to be\n")
    with pytest.raises(data.DataError, match="SHA-256"):
        data.shakespeare_path(tmp_path)


@needs_shakespeare
def test_first_use_downloads_into_the_cache_once(monkeypatch, tmp_path):
    fetched = []

    def fake_download(url, dest):  # stands in for the network: copies the shared file
        fetched.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHAKESPEARE, dest)

    monkeypatch.setattr(data, "download", fake_download)
    first, second = data.shakespeare_path(), data.shakespeare_path()
    assert first == second == tmp_path / "cache" / "gptkit" / "tinyshakespeare.txt"
    assert fetched == [data.source()["url"]], "downloaded once from the manifest's URL, then read from the cache"


def test_a_corrupt_download_is_refused(monkeypatch):
    monkeypatch.setattr(data, "download", lambda url, dest: (dest.parent.mkdir(parents=True), dest.write_text("x")))
    with pytest.raises(data.DataError, match="SHA-256"):
        data.shakespeare_path()
    assert not (data.cache_dir() / "tinyshakespeare.txt").exists(), "a bad download must not stay in the cache"


def test_a_failed_download_says_how_to_proceed(monkeypatch):
    def offline(url, dest):
        raise OSError("network is unreachable")

    monkeypatch.setattr(data, "download", offline)
    with pytest.raises(data.DataError, match=f"network is unreachable.*{data.ENV_VAR}"):
        data.shakespeare_path()


def test_python_corpus_is_deterministic_ascii_and_sized():
    files = data.python_files()
    assert files == sorted(files, key=lambda p: p.name) and len(files) > 10
    assert all(p.parent == files[0].parent for p in files), "only the stdlib's top level is read"
    text = data.python_text()
    assert text == data.python_text() and text.isascii()
    assert 500_000 < sum(p.stat().st_size for p in files) <= data.PYTHON_CORPUS_CHARS


def test_python_corpus_round_trips():
    ds = data.load_dataset("python")
    assert ds.tokenizer.decode(ds.train.tolist() + ds.val.tolist()) == data.python_text()


def test_unknown_characters_are_named():
    tok = data.CharTokenizer("abc")
    assert tok.decode(tok.encode("cab")) == "cab"
    for encode in (tok.encode, tok.encode_tensor):
        with pytest.raises(data.DataError, match="'z'"):
            encode("abz")
