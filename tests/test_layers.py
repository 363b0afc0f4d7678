"""The package's layers, checked: no module imports one from a higher layer (module-level or inside a function),
so the tree shows the architecture and no import runs back up. docs/design.md draws the same layers.

Two graphs are checked: the import statements (every one, in a function or not), and what runs when each module
is imported in a fresh interpreter (``importlib.import_module`` and registries' lazy entries included, which no
import statement shows). measurements/ is the floor above the CLI: its scripts may use any of gate, gate none of
them."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

import gate

# Lowest first. A module belongs to the longest prefix listed; a module may import its own layer and those below.
LAYERS = [
    ["gate", "gate.errors", "gate.files", "gate.forked", "gate.parallel", "gate.metrics", "gate.settings", "gate.conf",
     "gate.registry"],
    ["gate.results", "gate.families", "gate.transferability"],  # records; the family registry; pure scores
    ["gate.encoders", "gate.data"],
    ["gate.adapters"],
    ["gate.engine"],                      # build, model, validate, prepare, training
    ["gate.scoring"],                     # frozen features and the gate-score stage
    ["gate.analysis"],
    ["gate.tiers"],
    ["gate.ranking"],
    ["gate.cli"],
    ["measurements"],                     # scripts that measure gate (each may import any module of gate)
]
MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"


def layer_of(module: str) -> int:
    best, where = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, where = len(name), i
    assert where is not None, f"{module} is in no layer: add it to LAYERS (and to docs/design.md)"
    return where


def imports_of(path: Path, module: str, package: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
            found.update(n for n in map(ours, names) if n and _is_module(n))
        elif isinstance(node, ast.Import):
            found.update(n for n in (ours(a.name) for a in node.names) if n)
    return found


def ours(name: str) -> str | None:
    """``name`` as this check names it: a module of gate, ``measurements.<script>`` for a measurement script
    imported by its bare name (the scripts put their folder on sys.path), else None (not ours)."""
    if name == "gate" or name.startswith("gate."):
        return name
    if name.startswith("measurements."):
        return name
    head = name.split(".")[0]
    return f"measurements.{head}" if (MEASUREMENTS / f"{head}.py").exists() else None


def _is_module(name: str) -> bool:
    if name.startswith("measurements."):
        return (MEASUREMENTS / f"{name.split('.')[1]}.py").exists()
    root = Path(gate.__file__).resolve().parent
    rel = Path(*name.split(".")[1:])
    return name == "gate" or (root / rel).with_suffix(".py").exists() or (root / rel / "__init__.py").exists()


def modules():
    root = Path(gate.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        parts = ("gate", *path.relative_to(root).with_suffix("").parts)
        module = ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        yield path, module, package
    if gate.__file__ and Path(gate.__file__).resolve().parent == Path(__file__).resolve().parents[1] / "gate":
        for path in sorted(MEASUREMENTS.glob("*.py")):
            yield path, f"measurements.{path.stem}", "measurements"


def test_no_module_imports_from_a_higher_layer():
    upward = []
    for path, module, package in modules():
        for target in imports_of(path, module, package):
            if layer_of(target) > layer_of(module):
                upward.append(f"{module} imports {target}")
    assert not upward, "imports that run back up a layer:\n" + "\n".join(sorted(upward))


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from ..engine import build\n    import gate.cli.run\n")
    assert imports_of(src, "gate.data.m", "gate.data") == {"gate.engine", "gate.engine.build", "gate.cli.run"}
    assert layer_of("gate.engine.build") > layer_of("gate.data.spec")


def import_cycles() -> list[list[str]]:
    """Every set of modules that import each other round in a circle (module-level or inside a function): the
    strongly connected components of the import graph. A module's edge to its own parent packages is not counted
    (Python initialises a package before any of its modules; ``from . import x`` names the package)."""
    graph = {module: imports_of(path, module, package) for path, module, package in modules()}
    names = sorted(graph)
    index = {n: i for i, n in enumerate(names)}
    edges = [(index[m], index[t]) for m, targets in graph.items() for t in targets
             if t in index and t != m and not m.startswith(t + ".")]
    rows, cols = zip(*edges) if edges else ((), ())
    matrix = csr_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(names), len(names)))
    _, label = connected_components(matrix, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for name, lab in zip(names, label):
        groups.setdefault(int(lab), []).append(name)
    return sorted(g for g in groups.values() if len(g) > 1)


def test_no_import_cycles():
    cycles = import_cycles()
    assert not cycles, "modules that import each other in a circle:\n" + "\n".join(map(str, cycles))


def test_the_cycle_check_sees_a_cycle_through_a_function_level_import(tmp_path, monkeypatch):
    pkg = tmp_path / "gate"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "families.py").write_text("def f():\n    from gate.data import spec\n")
    (pkg / "data" / "__init__.py").write_text("")
    (pkg / "data" / "spec.py").write_text("from ..families import f\n")
    monkeypatch.setattr(gate, "__file__", str(pkg / "__init__.py"))
    assert import_cycles() == [["gate.data.spec", "gate.families"]]


# What runs, module by module: a fresh interpreter imports every module of gate and every measurement script with
# the import machinery watched; each executed import (a statement, importlib.import_module, a registry's lazy
# entry) is an edge from the module whose code ran it.
_WATCH = r"""
import builtins, importlib, importlib.util, json, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
measurements = Path(sys.argv[1])
names, edges = json.loads(sys.argv[2]), set()

known = {}

def ours(name):  # asked for every import torch and the rest run: a file check each time cost seconds
    if name not in known:
        head = name.split(".")[0]
        known[name] = name if name == "gate" or name.startswith(("gate.", "measurements.")) else (
            f"measurements.{head}" if (measurements / f"{head}.py").exists() else None)
    return known[name]

def note(importer, target):
    a, b = ours(importer or ""), ours(target or "")
    if a and b and a != b:
        edges.add((a, b))

real_import, real_import_module = builtins.__import__, importlib.import_module

def watched_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = real_import(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    package = (globals or {}).get("__package__") or ""
    target = importlib.util.resolve_name("." * level + name, package) if level else name
    note(importer, target)
    for item in fromlist or ():
        if f"{target}.{item}" in sys.modules:
            note(importer, f"{target}.{item}")
    return module

def watched_import_module(name, package=None):
    module = real_import_module(name, package)
    note(sys._getframe(1).f_globals.get("__name__", ""), module.__name__)
    return module

builtins.__import__, importlib.import_module = watched_import, watched_import_module
sys.path.insert(0, str(measurements))
for name in names:
    if name.startswith("measurements."):
        spec = importlib.util.spec_from_file_location(name, measurements / (name.split(".")[1] + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        importlib.import_module(name)
print(json.dumps(sorted(edges)))
"""


def runtime_edges(names: list[str] | None = None, measurements: Path = MEASUREMENTS) -> list[tuple[str, str]]:
    """(importer, imported) of every import that runs when each module is imported, in a fresh interpreter."""
    names = names if names is not None else [module for _, module, _ in modules()]
    out = subprocess.run([sys.executable, "-c", _WATCH, str(measurements), json.dumps(names)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [tuple(edge) for edge in json.loads(out.stdout.strip().splitlines()[-1])]


def test_nothing_that_runs_at_import_climbs_a_layer():
    edges = runtime_edges()
    assert ("gate.families", "gate.registry") in edges  # the watch sees what ran
    upward = [f"{a} loads {b}" for a, b in edges if layer_of(b) > layer_of(a) and not a.startswith(b + ".")]
    assert not upward, "imports that run back up a layer when a module is imported:\n" + "\n".join(sorted(upward))


def test_the_watch_sees_an_import_no_statement_shows(tmp_path):
    script = tmp_path / "dynamic.py"
    script.write_text("import importlib\nimportlib.import_module('gate.errors')\n")
    assert imports_of(script, "measurements.dynamic", "measurements") == set()
    assert runtime_edges(["measurements.dynamic"], tmp_path) == [("measurements.dynamic", "gate.errors")]
