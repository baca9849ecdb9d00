"""``remove_tree``: what a worker wrote is deleted whatever its shape, and a clean-up that fails never raises."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from grader.sandbox import client
from grader.sandbox.client import remove_tree


def deep(folder: Path, levels: int) -> None:
    """``levels`` nested folders in ``folder``, made by descriptor (their path is longer than the system takes)."""
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        deeper = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    os.close(os.open("last", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)


def test_a_deep_tree_with_unreadable_folders_and_links_is_deleted(tmp_path):
    """2,000 levels (past 3.11's ``shutil.rmtree``, which dies of RecursionError), an unreadable folder, and a
    link to a folder outside, which is removed without a file behind it touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the worker's")
    copy = tmp_path / "copy"
    copy.mkdir()
    deep(copy, 2000)
    (copy / "locked").mkdir()
    (copy / "locked" / "f").write_text("x")
    (copy / "locked").chmod(0)
    (copy / "link").symlink_to(outside)
    (copy / "file").write_text("x")
    with pytest.raises(RecursionError):
        shutil.rmtree(copy / "d")  # what the clean-up used to do
    assert remove_tree(copy) is True
    assert not copy.exists()
    assert (outside / "keep.txt").read_text() == "not the worker's"


def test_a_link_or_a_file_or_nothing(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "file").write_text("x")
    assert remove_tree(tmp_path / "link") and remove_tree(tmp_path / "file") and remove_tree(tmp_path / "none")
    assert target.is_dir() and not (tmp_path / "link").exists() and not (tmp_path / "file").exists()


def test_a_failed_clean_up_is_said_once_and_never_raises(tmp_path, monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(client, "_cleanup_said", False)
    monkeypatch.setattr(os, "rmdir", refuse)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        assert remove_tree(tmp_path / name) is False
    err = capsys.readouterr().err
    assert err.count("could not delete") == 1 and "Traceback" not in err, err


@pytest.mark.skipif(not hasattr(os, "O_PATH"), reason="Linux: the folder is opened by descriptor to change its mode")
def test_an_unreadable_folder_swapped_for_a_link_is_never_chmodded_through_it(tmp_path, monkeypatch):
    """A folder the worker made unreadable is made readable again before it is deleted. Where a process of the
    worker's outlived it and swapped that folder for a link to something of the machine's, the change of mode
    must not follow the link: the machine's folder keeps its mode (it was made 0o700 through the link before)."""
    machine = tmp_path / "machine"
    machine.mkdir(mode=0o755)
    machine.chmod(0o755)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "locked").symlink_to(machine)  # listed as a folder, then swapped: what _open_dir now meets
    real_open = os.open

    def refused_once(path, flags, *args, **kwargs):  # as a non-root grader meets an unreadable folder
        if path == "locked" and not flags & os.O_PATH:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(client.os, "open", refused_once)
    fd = real_open(copy, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError):
            client._open_dir("locked", fd)
    finally:
        os.close(fd)
    assert machine.stat().st_mode & 0o777 == 0o755
