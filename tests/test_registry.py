"""gate.registry.Registry: the one registry type (families, renderers, scores, launchers, statistics)."""

import importlib.metadata
import sys
import types

import pytest

from gate.errors import ConfigError
from gate.registry import Registry


def test_a_decorator_a_call_and_one_error_naming_every_known_entry():
    reg = Registry("widget", hint=" (add one with reg.register)")

    @reg.register("b")
    def b():
        return 2

    reg.register("a", len)
    assert reg["b"] is b and reg.lookup("a") is len
    assert reg.names() == ("a", "b") and "a" in reg and len(reg) == 2
    with pytest.raises(ValueError) as err:
        reg.lookup("c")
    assert str(err.value) == "unknown widget 'c'; known: ['a', 'b'] (add one with reg.register)"
    with pytest.raises(KeyError):
        reg["c"]
    assert reg.get("c") is None


def test_a_config_key_registry_speaks_of_the_key_and_raises_its_error_type():
    reg = Registry("launcher", key="launch", error=ConfigError)
    reg.register("local", print)
    with pytest.raises(ConfigError, match=r"^launch='nope' is unknown: choose one of \['local'\]$"):
        reg.lookup("nope")


def test_the_same_entry_twice_is_a_no_op_and_another_is_refused():
    reg = Registry("widget")
    reg.register("a", len)
    reg.register("a", len)
    with pytest.raises(ValueError, match="widget 'a' is already registered with another entry"):
        reg.register("a", print)
    reg.unregister("a")
    reg.register("a", print)
    assert reg["a"] is print


def test_a_lazy_entry_imports_its_module_on_first_use_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_widget_mod.py").write_text("IMPORTED = True\ndef make():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_widget_mod", raising=False)
    reg = Registry("widget")
    reg.register("w", "lazy_widget_mod:make")
    assert "w" in reg and "lazy_widget_mod" not in sys.modules  # named, not imported
    assert reg["w"]() == 7 and "lazy_widget_mod" in sys.modules
    reg.register("w", sys.modules["lazy_widget_mod"].make)  # the resolved thing again: a no-op


def test_entry_points_of_other_packages_register_lazily_or_by_their_module(tmp_path, monkeypatch):
    (tmp_path / "other_pkg_widgets.py").write_text(
        "from gate_registry_test import REG\ndef two():\n    return 2\nREG.register('by_module', two)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("widget", group="gate.test_widgets")
    monkeypatch.setitem(sys.modules, "gate_registry_test", types.SimpleNamespace(REG=reg))
    eps = [importlib.metadata.EntryPoint("lazy", "other_pkg_widgets:two", "gate.test_widgets"),
           importlib.metadata.EntryPoint("by_module", "other_pkg_widgets", "gate.test_widgets"),
           importlib.metadata.EntryPoint("broken", "json", "gate.test_widgets")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [e for e in eps if e.group == group])
    assert reg["lazy"]() == 2
    assert reg["by_module"]() == 2
    with pytest.raises(ValueError, match="the entry point broken = 'json' of gate.test_widgets registers no widget"):
        reg.names()


def test_a_loader_registers_entries_declared_as_data():
    asked = []
    reg: Registry[int] = Registry("number")

    def loader(name):
        asked.append(name)
        for key, value in {"one": 1, "two": 2}.items():
            if name in (None, key):
                reg.register(key, value)

    reg.loader = loader
    assert reg["two"] == 2 and asked == ["two"] and list(reg) == ["two"]
    assert reg.all() == {"one": 1, "two": 2}


def test_gate_finds_families_renderers_scores_launchers_and_statistics_through_it():
    from gate.engine.training.visuals import RENDERERS
    from gate.families import FAMILIES
    from gate.ranking.stats import STATISTICS
    from gate.tiers.launchers import LAUNCHERS
    from gate.transferability import DISCREPANCIES, SCORES

    for reg in (FAMILIES, RENDERERS, SCORES, DISCREPANCIES, LAUNCHERS, STATISTICS):
        assert isinstance(reg, Registry) and reg.names()
    assert "launch=" in LAUNCHERS.unknown("x") and "unknown task family 'x'" in FAMILIES.unknown("x")


def test_replacing_swaps_an_entry_for_a_block_and_puts_it_back():
    reg = Registry("widget")
    reg.register("a", len)
    with reg.replacing("a", print) as swapped, reg.replacing("b", abs):
        assert reg["a"] is print is swapped and reg["b"] is abs
    assert reg["a"] is len and "b" not in reg
