"""Directory names: DSH's escaping, pinned by the odd-name fixtures, and ids that must never escape the root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.paths import encode_segment, log_path, project_key
from tests.harness.persistence.fixture_logs import load_fixture


@pytest.mark.parametrize("name", ["c-odd-names/none", "c-odd-names/zstd", "c3-long-cwd/none", "c2-no-cwd/zstd",
                                  "a-one-turn/none", "d-long/zstd"])
def test_directory_names_match_dsh(name: str) -> None:
    fixture = load_fixture(name)
    expected = fixture.expected
    cwd = expected["cwd"]
    assert (project_key(cwd) if cwd is not None else "_no-cwd") == expected["projectDirName"]
    assert encode_segment(expected["sessionId"]) == expected["sessionDirName"]
    store = JsonlBackend(fixture.folder / "store", fixture.compression)  # type: ignore[arg-type]
    # DSH 0.1.1 wrote these logs (format v0, ``session.jsonl[.zstd]``); a new log there is v4, in the same directory.
    compression: Any = fixture.compression
    assert log_path(store.root, cwd, expected["sessionId"], compression, 0) == fixture.log_file
    assert store.path_for(expected["sessionId"], cwd) == fixture.log_file.with_name(
        "session.v4.jsonl.zstd" if fixture.compression == "zstd" else "session.v4.jsonl")


def test_escape_works_per_utf16_code_unit() -> None:
    assert encode_segment("🚀") == "~D83D~DE80"
    assert encode_segment("\ud800") == "~D800"  # a lone surrogate is one code unit
    assert encode_segment("~") == "~007E"
    assert encode_segment("a.b-c_D9") == "a.b-c_D9"
    assert encode_segment("é") == "~00E9"


def test_project_key_collapses_separators_and_strips_leading_dashes() -> None:
    assert project_key("/home/dev/projects/demo") == "--home-dev-projects-demo--"
    assert project_key("C:\\Users\\dev") == "--C-Users-dev--"
    assert project_key("a//\\:b") == "--a-b--"
    assert project_key("/") == "--root--"
    assert project_key("-x") == "--x--"
    assert project_key("--") == "--root--"
    assert project_key("a/-b") == "--a--b--"  # only leading dashes go; a literal dash stays


def test_project_key_is_cut_to_251_characters() -> None:
    key = project_key("/" + "é" * 200)
    assert len(key) == 255 and key.startswith("--~00E9") and key.endswith("--")
    assert key[2:-2] == ("~00E9" * 200)[:251]


def test_empty_names_are_refused() -> None:
    with pytest.raises(ValueError, match="empty path segment"):
        encode_segment("")
    with pytest.raises(ValueError, match="empty project path"):
        project_key("")


@pytest.mark.parametrize("session_id", ["..", ".", "/", "../../etc/passwd", "a/../../b", "\x00", "a\x00b",
                                        "/abs/path", "\\..\\x", "~", "..."])
def test_session_ids_never_escape_the_root(tmp_path: Path, session_id: str) -> None:
    root = tmp_path / "root"
    path = log_path(root, "/work", session_id, "none")
    segment = path.parent.name
    assert path.parent.parent.parent == root
    assert segment not in (".", "..") and "/" not in segment and "\x00" not in segment and "\\" not in segment
    assert os.path.realpath(path).startswith(str(root) + os.sep)


def test_dots_inside_ids_are_kept_but_whole_dot_segments_are_escaped() -> None:
    assert encode_segment(".") == "~002E"
    assert encode_segment("..") == "~002E~002E"
    assert encode_segment("...") == "..."
    assert encode_segment("a..b") == "a..b"


def test_writing_with_hostile_ids_stays_inside_root(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "none")
    for index, session_id in enumerate(["..", "/", "a\x00b", "../escape"]):
        writer = store.create({"id": session_id, "createdAt": 1, "cwd": "/w"})
        writer.append([{"type": "turn/start", "seq": 0, "time": 2, "data": {"turn": 1}}])
        writer.close()
        assert writer.path.resolve().is_relative_to((tmp_path / "root").resolve())
        assert store.read(session_id).events[0]["seq"] == 0
        assert len(store.stored_sessions()) == index + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    with pytest.raises(ValueError, match="empty"):
        store.create({"id": "", "createdAt": 1})
