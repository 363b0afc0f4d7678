"""The package's layers, checked: no module imports one from a higher layer (module-level or inside a function),
so the tree shows the architecture and no import runs back up. docs/design.md draws the same layers."""

import ast
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

import gate

# Lowest first. A module belongs to the longest prefix listed; a module may import its own layer and those below.
LAYERS = [
    ["gate", "gate.errors", "gate.files", "gate.parallel", "gate.metrics", "gate.settings", "gate.conf"],
    ["gate.results", "gate.families", "gate.transferability"],  # records; the family registry; pure scores
    ["gate.encoders", "gate.data"],
    ["gate.adapters"],
    ["gate.engine"],                      # build, model, validate, prepare, training
    ["gate.scoring"],                     # frozen features and the gate-score stage
    ["gate.analysis"],
    ["gate.tiers"],
    ["gate.ranking"],
    ["gate.cli"],
]


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
            found.update(n for n in names if n.startswith("gate") and _is_module(n))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("gate"))
    return found


def _is_module(name: str) -> bool:
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
