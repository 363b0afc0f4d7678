"""The transferability scores' earlier import path, kept for code written against it: the scores are the pure
functions of :mod:`gate.transferability` (a low layer: base → results, families, transferability → ...), which
this module re-exports."""

from gate.transferability import *  # noqa: F403 - the whole public surface, by its __all__
from gate.transferability import __all__  # noqa: F401
