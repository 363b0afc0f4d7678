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
    assert "bash scripts/install.sh && .venv/bin/gate-tier\n" in first  # the main job
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


def test_readme_links_only_to_files_in_the_repository():
    for target in re.findall(r"\]\(([^)#\s]+)", README):
        if re.match(r"[a-z]+://", target):
            continue
        path = (ROOT / target).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"README links to {target}, not a file of the repository"


def test_activating_the_venv_puts_every_command_on_path():
    activate = Path(sys.prefix) / "bin" / "activate"
    assert activate.is_file(), "the tests run from the virtual environment scripts/install.sh creates"
    out = subprocess.run(["bash", "-c", f"source {activate} && command -v gate-run gate-score gate-analysis "
                          f"gate-eevee gate-tier && gate-run seed=abc"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert len(out.stdout.split()) == 5, out.stdout + out.stderr
    assert out.returncode == 2 and "gate-run: error: seed='abc'" in out.stderr
