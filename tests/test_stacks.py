"""The install's own check (python -m gate.stacks): every packaged stack loads here, and a missing piece is one line
naming it and the command that installs it, from the check and from gate-run alike.

The missing library is planted, not hoped for: a ``soundfile`` module first on the path fails as soundfile's pure
wheel does on a machine without libsndfile (the words are soundfile 0.14's, seen on a fresh machine: issue 33), so
the tests fail wherever the check would let that machine through, whatever this machine has installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate import stacks

MISSING = "cannot load library 'libsndfile.so': libsndfile.so: cannot open shared object file: No such file or directory"


@pytest.fixture
def no_libsndfile(monkeypatch):
    """This process as on a machine where soundfile's library is missing (its probe fails as soundfile does)."""
    def soundfile_without_its_library():
        raise OSError(MISSING)

    library = stacks.LIBRARIES["libsndfile"]
    monkeypatch.setitem(stacks.LIBRARIES, "libsndfile", stacks.Library(library.what, soundfile_without_its_library,
                                                                        library.fix))
    stacks._library_error.cache_clear()
    yield
    stacks._library_error.cache_clear()


def test_every_packaged_stack_loads_here():
    assert stacks.problems() == []


def test_the_check_names_the_missing_library_and_its_fix_in_one_line(tmp_path):
    (tmp_path / "soundfile.py").write_text(f"raise OSError({MISSING!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "gate.stacks", "text", "clip", "audio", "video"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    line = lines[0]
    assert line.startswith("gate: soundfile's native library libsndfile")
    assert "the text model and tokenizer" in line and "CLIP-style processors" in line and "audio encoders" in line
    assert "Install it with: sudo apt-get install libsndfile1" in line
    assert "video" not in line  # video decoding does not need it, and loaded


def test_an_unknown_stack_is_refused():
    done = subprocess.run([sys.executable, "-m", "gate.stacks", "txt"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"gate: unknown stack 'txt'; known: {', '.join(stacks.STACKS)}"]


def test_gate_run_says_the_same_line_not_the_loaders_error(tmp_path, capsys, no_libsndfile):
    """fmnist_pairs' text tower is the packaged MiniLM: on such a machine gate-run ends with the check's line."""
    from gate.cli.run import main

    from helpers import SMOKE, call_cli

    result = call_cli(main, [f"paths.root={tmp_path}", "dataset=fmnist_pairs", "encoder=resnet18_scratch", *SMOKE],
                      capsys, prog="gate-run")
    assert result.returncode == 2, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("gate-run: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "soundfile's native library libsndfile" in errors[0]
    assert "the text model and tokenizer" in errors[0] and "sudo apt-get install libsndfile1" in errors[0]
    assert not list(Path(tmp_path).glob("results/*.jsonl")) or not Path(tmp_path, "results/records.jsonl").read_text()


def test_an_encoder_built_directly_says_it_too(no_libsndfile):
    from gate.encoders import HFTextEncoder

    with pytest.raises(stacks.StackMissing, match="libsndfile.*sudo apt-get install libsndfile1"):
        HFTextEncoder()
