"""The error type for failures the user can fix (bad config, bad data, missing files, offline weights).

Library code raises :class:`GateError` (or a ``ValueError``/``OSError`` whose message names the bad input and
what would be valid); the entry points turn these into one line on stderr and exit code 2
(:func:`gate.cli.common.run_cli`).
"""

from __future__ import annotations


class GateError(Exception):
    """An expected failure whose message tells the user what is wrong and what would be valid."""


class ConfigError(GateError, ValueError):
    """A composed config that cannot mean what it says (wrong type, out of range, inconsistent)."""


class DatasetUnavailable(GateError, FileNotFoundError):
    """A dataset whose files are not on disk here (and cannot be fetched now): the message says what to download,
    from where, and where to put it (``dataset.data_dir``)."""
