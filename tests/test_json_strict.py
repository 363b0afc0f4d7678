"""Every JSON file gate writes is strict JSON (issue 27: gate-rank's ledger.json held a bare NaN, which no JSON
parser but Python's reads): each ``json.dump``/``json.dumps`` that writes a file passes ``allow_nan=False``, and
what was not measured is written null."""

import ast
import json
import math
from pathlib import Path

import gate
from gate.results import Record, ResultsStore

# json.dumps calls that build an in-memory key or hash, never a file (a NaN there is only text in a digest).
NOT_WRITTEN = {
    ("results.py", "stable_hash"), ("data/manifest.py", "_digest"), ("data/loaders/video.py", "_stamp"),
    ("scoring/features.py", "_load_cached"), ("analysis/load.py", "_canonical"), ("analysis/load.py", "_fmt_value"),
    ("analysis/load.py", "_record_row"), ("analysis/load.py", "_fill_experiment"),
}


def strict(text: str):
    def refuse(constant):
        raise ValueError(f"bare {constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def test_every_json_writer_refuses_nan():
    root = Path(gate.__file__).resolve().parent
    lax = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or (rel, fn.name) in NOT_WRITTEN:
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("dump", "dumps") and getattr(node.func.value, "id", None) == "json"
                        and not any(k.arg == "allow_nan" and getattr(k.value, "value", None) is False
                                    for k in node.keywords)):
                    lax.append(f"{rel}:{node.lineno} ({fn.name})")
    assert not lax, f"json.dump(s) without allow_nan=False: {sorted(set(lax))}"


def test_a_fact_that_was_not_measured_is_stored_null(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append([Record(experiment="e", kind="score", encoder="x", dataset="d", task="classification", adapter="",
                         recipe="", seed=0, split="train", metric="logme", value=1.0,
                         facts={"seconds": math.nan, "split_rows": {"train": {"used": 5, "of": math.inf}}})])
    (row,) = [strict(line) for line in store.path.read_text().splitlines()]
    assert row["facts"] == {"seconds": None, "split_rows": {"train": {"used": 5, "of": None}}}
