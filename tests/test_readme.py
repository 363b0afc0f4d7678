"""The README's promises hold: its example runs as written, and CI runs its test command."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gate.results import ResultsStore

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def examples() -> dict[str, str]:
    """The fenced blocks preceded by ``<!-- example:PATH -->``, by PATH."""
    pattern = re.compile(r"<!-- example:(\S+) -->\s*```\w*\n(.*?)```", re.S)
    return {path: body for path, body in pattern.findall(README)}


def fenced_bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, re.S)


def test_readme_opens_with_the_two_commands():
    first, second = fenced_bash_blocks()[:2]
    assert "gate-run" in first and "install" in first
    assert "pytest" in second and "install" in second


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = [line for line in fenced_bash_blocks()[1].splitlines() if line and not line.startswith("#")][0]
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


@pytest.mark.slow
def test_add_your_own_encoder_example_works_as_written(tmp_path):
    found = examples()
    assert set(found) == {"my_encoders.py", "my_configs/encoder/tiny_cnn.yaml", "run.sh"}
    for rel, body in found.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "run.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = ResultsStore(tmp_path / "gate_outputs" / "results" / "records.jsonl").records()
    assert rows and {r["encoder"] for r in rows} == {"tiny_cnn"} and {r["dataset"] for r in rows} == {"digits"}
