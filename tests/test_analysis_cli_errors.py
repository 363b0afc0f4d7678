"""Bad inputs to gate-analysis and gate-eevee: one line naming the file or key on stderr, a non-zero exit
code, never a traceback. Each case runs the real command line (Hydra parses ``sys.argv``) through the entry
point's ``main()`` in this process, from the test's temporary directory, on a tiny table (tests/helpers.py
``call_cli``); the real subprocess runs of both commands are in test_analysis_e2e.py and test_eevee.py."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from gate.analysis.load import load_results
from gate.cli import analysis, eevee

from helpers import CliResult, call_cli

TINY_EEVEE = ["population=4", "keep=2", "children=1", "generations=0", "n_splits=2", "epochs=1", "hidden=4",
              "progress=false", "importance=false", "figures=false"]


def _bad_inputs(d: Path) -> dict[str, tuple[Path, str]]:
    """name → (file, a text the error must contain)."""
    files = {
        "missing": (d / "nope.csv", None, "nope.csv"),
        "directory": (d / "a_dir", None, "a_dir"),
        "png": (d / "plot.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not a results file"),
        "gzip": (d / "records.jsonl.gz", gzip.compress(b'{"kind": "finetune"}\n' * 10), "not a results file"),
        "binary_jsonl": (d / "blob.jsonl", bytes(range(256)) * 4, "not a results file"),
        "latin1": (d / "latin1.csv", "encoder,dataset,metric,value\na,café,acc@1,0.5\n".encode("latin-1"),
                   "not a results file"),
        "empty": (d / "empty.csv", b"", "empty"),
        "inf": (d / "inf.csv", b"encoder,dataset,metric,value\na,x,acc@1,0.5\nb,x,acc@1,inf\nc,x,acc@1,0.7\n",
                "value inf for dataset 'x', metric 'acc@1', encoder 'b'"),
        "minus_inf_wide": (d / "wide_inf.csv",
                           b"family,dataset,metric,higher_is_better,a,b,c\nF,x,acc@1,true,1,-inf,3\n",
                           "value -inf for dataset 'x', metric 'acc@1', encoder 'b'"),
        "constant": (d / "constant.csv", b"family,dataset,metric,higher_is_better,a,b,c\nF,x,acc@1,true,1,1,1\n"
                                         b"F,y,acc@1,true,1,1,1\n", "constant table"),
        "missing_columns": (d / "cols.csv", b"encoder,dataset,score\na,x,1\n",
                            "missing required column(s) ['metric', 'value']"),
        "no_encoders": (d / "noenc.csv", b"family,dataset,metric,higher_is_better\nF,x,acc@1,true\n",
                        "no encoder columns"),
    }
    out = {}
    for name, (path, data, expect) in files.items():
        if name == "directory":
            path.mkdir()
        elif data is not None:
            path.write_bytes(data)
        out[name] = (path, expect)
    return out


CASES = ["missing", "directory", "png", "gzip", "binary_jsonl", "latin1", "empty", "inf", "minus_inf_wide", "constant",
         "missing_columns", "no_encoders"]


MAINS = {"gate.cli.analysis": (analysis.main, "gate-analysis"), "gate.cli.eevee": (eevee.main, "gate-eevee")}


@pytest.fixture
def in_tmp(tmp_path, monkeypatch, capsys):
    """``run(module, args)``: the command, in process, from the test's temporary directory."""
    monkeypatch.chdir(tmp_path)

    def run(module: str, args: list[str]) -> CliResult:
        main, prog = MAINS[module]
        return call_cli(main, args, capsys, prog=prog)

    return run


def _check(proc: CliResult, cmd: str, expect: str) -> None:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-2000:]
    assert "Traceback" not in text, text[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith(f"{cmd}: error: ")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert expect in errors[0], errors[0]


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return _bad_inputs(tmp_path_factory.mktemp("bad"))


@pytest.mark.parametrize("case", CASES)
def test_gate_analysis_refuses_bad_input_in_one_line(bad, case, tmp_path, in_tmp):
    path, expect = bad[case]
    proc = in_tmp("gate.cli.analysis", [f"results={path}", f"out={tmp_path / 'out'}", "figures=false"])
    _check(proc, "gate-analysis", expect)
    if case not in ("missing_columns", "no_encoders", "constant", "inf", "minus_inf_wide"):
        assert path.name in proc.stderr  # the offending path is named
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.parametrize("case", CASES)
def test_gate_eevee_refuses_bad_input_in_one_line(bad, case, tmp_path, in_tmp):
    path, expect = bad[case]
    proc = in_tmp("gate.cli.eevee", [f"table={path}", f"out={tmp_path / 'out'}", "k=1", *TINY_EEVEE])
    _check(proc, "gate-eevee", expect)
    assert path.name in proc.stderr


def test_unknown_filter_column_is_named(tmp_path, in_tmp):
    table = tmp_path / "ok.csv"
    table.write_text("encoder,dataset,metric,value\na,x,acc@1,0.5\nb,x,acc@1,0.7\nc,x,acc@1,0.6\n")
    proc = in_tmp("gate.cli.analysis", [f"results={table}", f"out={tmp_path / 'out'}", "figures=false",
                                        "+filters.colour=red"])
    _check(proc, "gate-analysis", "filter on unknown column 'colour'")


def test_eevee_k_forms_on_the_command_line(tmp_path, in_tmp):
    """k=1-2 runs one search per k (k=[1,2]: the slow test in test_eevee.py); a bare k=1,2 is Hydra's sweep
    syntax: refused, no traceback."""
    table = tmp_path / "t.csv"
    table.write_text("family,dataset,metric,higher_is_better,a,b,c,d,e\n"
                     "F,x,acc@1,true,1,2,3,4,5\nF,y,acc@1,true,2,1,4,3,5\nF,z,acc@1,true,5,3,1,2,4\n")
    proc = in_tmp("gate.cli.eevee", [f"table={table}", f"out={tmp_path / 'out'}", "k=1-2", *TINY_EEVEE])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "k=1: best subset" in proc.stdout and "k=2: best subset" in proc.stdout
    proc = in_tmp("gate.cli.eevee", [f"table={table}", "k=1,2", *TINY_EEVEE])
    assert proc.returncode != 0 and "Traceback" not in proc.stdout + proc.stderr
    assert "k=1,2" in proc.stderr


def test_the_same_errors_in_process(bad):
    """The library raises ValueError (or FileNotFoundError/IsADirectoryError) with the same one-line message."""
    for case in CASES:
        path, expect = bad[case]
        error = (FileNotFoundError if case == "missing" else IsADirectoryError if case == "directory"
                 else ValueError)
        with pytest.raises(error) as info:
            load_results(path)
        assert expect in str(info.value) and "\n" not in str(info.value)
