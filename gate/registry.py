"""One registry type for what gate finds by name: task families, renderers, transferability scores, launchers and
ranking statistics.

A :class:`Registry` maps a name to a thing. An entry is registered by a call (``reg.register(name, thing)``), as a
decorator (``@reg.register("name")``), or lazily as ``"module:attr"`` (imported on its first use, so a registry
of heavy things costs nothing until one is asked for). Another package adds entries through an entry-point group
(``group=``): ``name = "module:attr"`` is registered lazily; ``name = "module"`` names a module that registers
``name`` itself when imported. A ``loader`` hook finds entries declared as data (the task families' YAML files).

Registering an equal entry again is a no-op (a module imported twice); a different entry under a registered name is
refused, so two modules cannot silently disagree about one name. :meth:`Registry.lookup` is the one place an unknown
name becomes an error, and that error names every known one.

Plain Python: this module imports nothing of gate's, so any floor may use it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_ABSENT = object()

__all__ = ["Registry", "load_object"]


def load_object(where: str) -> Any:
    """What ``"module:attr"`` (or ``"module:attr.attr"``) names, importing the module."""
    module, _, path = where.partition(":")
    found: Any = importlib.import_module(module)
    for attr in path.split(".") if path else ():
        found = getattr(found, attr)
    return found


class Registry(Mapping[str, T], Generic[T]):
    """Names to things of one kind.

    kind: what an entry is, in messages (``task family``, ``launcher``).
    group: the entry-point group through which other packages add entries (None: none).
    loader: ``loader(name)`` registers ``name`` from elsewhere (data files) if it can; ``loader(None)`` registers all.
    key: the config key that chooses an entry (``launch``): an unknown name is then reported as that key's value.
    hint: words added to the unknown-name error (how to add one).
    error: the exception type of that error.

    ``name in reg``, ``len(reg)`` and iteration see what is registered now (nothing is imported or loaded);
    ``reg[name]`` and :meth:`lookup` load what is needed; :meth:`names` loads everything first.
    """

    def __init__(self, kind: str, *, group: str | None = None, loader: Callable[[str | None], None] | None = None,
                 key: str | None = None, hint: str = "", error: type[Exception] = ValueError) -> None:
        self.kind, self.group, self.loader, self.key, self.hint, self.error = kind, group, loader, key, hint, error
        self._entries: dict[str, Any] = {}     # name -> thing, or "module:attr" until first use
        self._grouped: set[str] = set()        # entry-point names already taken in

    # ---------------------------------------------------------------------------------------------- registering
    def register(self, name: str, thing: Any = None) -> Any:
        """Register ``thing`` (or ``"module:attr"``) as ``name``; without ``thing``, a decorator that registers what
        it decorates. Returns ``thing``."""
        if thing is None:
            return lambda fn: self.register(name, fn)
        known = self._entries.get(name)
        if known is not None and known is not thing and known != thing:
            if not (isinstance(known, str) and self._lazy(known) and self._resolve(name) is thing):
                raise ValueError(f"{self.kind} {name!r} is already registered with another entry; unregister it "
                                 f"first")
        self._entries[name] = thing
        return thing

    @contextlib.contextmanager
    def replacing(self, name: str, thing: Any) -> Iterator[Any]:
        """``name`` held by ``thing`` inside the ``with`` block, what it held before (or nothing) after it: a test
        that swaps a score for a broken one, without the refusal :meth:`register` gives a different entry."""
        before = self._entries.get(name, _ABSENT)
        self._entries[name] = thing
        try:
            yield thing
        finally:
            if before is _ABSENT:
                self._entries.pop(name, None)
            else:
                self._entries[name] = before

    def unregister(self, name: str) -> Any:
        """Remove ``name`` (tests that register a toy entry clean up with this); returns what it held, or None."""
        return self._entries.pop(name, None)

    # ------------------------------------------------------------------------------------------------- reading
    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            self._find(name)
        if name not in self._entries:
            raise KeyError(name)
        return self._resolve(name)

    def lookup(self, name: str) -> T:
        """The entry ``name``, or :attr:`error` naming the known ones."""
        try:
            return self[name]
        except KeyError:
            raise self.error(self.unknown(name)) from None

    def unknown(self, name: Any) -> str:
        """The one line that says ``name`` is not registered, naming every entry that is."""
        known = list(self.names())
        text = (f"{self.key}={name!r} is unknown: choose one of {known}" if self.key
                else f"unknown {self.kind} {name!r}; known: {known}")
        return f"{text}{self.hint}"

    def names(self) -> tuple[str, ...]:
        """Every name, sorted, once everything declared elsewhere (data, entry points) is registered."""
        self._find(None)
        return tuple(sorted(self._entries))

    def all(self) -> dict[str, T]:
        """Every entry, resolved, by name."""
        return {name: self[name] for name in self.names()}

    # ---------------------------------------------------------------------------------------------- internals
    @staticmethod
    def _lazy(value: Any) -> bool:
        return isinstance(value, str) and ":" in value

    def _resolve(self, name: str) -> T:
        value = self._entries[name]
        if self._lazy(value):
            self._entries[name] = value = load_object(value)
        return value

    def _find(self, name: str | None) -> None:
        """Register ``name`` (every name when None) from the loader, then from the entry-point group."""
        if self.loader is not None:
            self.loader(name)
        if self.group is None or (name is not None and name in self._entries):
            return
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            if (name is not None and ep.name != name) or ep.name in self._grouped:
                continue
            self._grouped.add(ep.name)
            if ":" in ep.value:
                self.register(ep.name, ep.value)
                continue
            importlib.import_module(ep.value)
            if ep.name not in self._entries:
                raise ValueError(f"the entry point {ep.name} = {ep.value!r} of {self.group} registers no "
                                 f"{self.kind} {ep.name!r}: its module must register it")
