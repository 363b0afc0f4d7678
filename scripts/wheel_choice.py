"""Which file of an installed version pip would have chosen, and the installed wheels that differ from it.

uv and pip agree on versions but not always on files: with several indexes, uv's ``unsafe-best-match`` takes a
version's files from the first index that has that version, where pip pools every index's files and takes the one
whose tags this interpreter ranks highest. A package published as a pure ``none-any`` wheel on one index and a
``manylinux`` wheel bundling its native library on another (soundfile: libsndfile) then installs without its
library under uv. :func:`mismatches` lists every installed wheel that ranks below the best file the sources hold
for its version, so scripts/uv_install.py can put pip's choice in its place.

The ranking is pip's (``CandidateEvaluator._sort_key``): a wheel ranks by the position of its best tag in
``packaging.tags.sys_tags()``; a wheel whose tags this interpreter does not support, a yanked file and an sdist
(where a wheel exists) are not chosen.
"""

from __future__ import annotations

import dataclasses
import html.parser
import json
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    from packaging.tags import Tag, parse_tag, sys_tags
    from packaging.utils import canonicalize_name, canonicalize_version, parse_wheel_filename
except ImportError:  # a bare venv: pip always vendors it
    from pip._vendor.packaging.tags import Tag, parse_tag, sys_tags  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import (  # type: ignore[no-redef]
        canonicalize_name,
        canonicalize_version,
        parse_wheel_filename,
    )

PYPI = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


@dataclasses.dataclass(frozen=True)
class Installed:
    name: str          # canonical
    version: str
    tags: frozenset    # of packaging Tag: the WHEEL file's Tag lines


@dataclasses.dataclass(frozen=True)
class Candidate:
    filename: str
    url: str
    yanked: bool = False


@dataclasses.dataclass(frozen=True)
class Mismatch:
    installed: Installed
    installed_tag: str
    chosen: Candidate       # the file pip takes for the same version

    def line(self) -> str:
        return (f"{self.installed.name} {self.installed.version}: installed {self.installed_tag}, "
                f"pip takes {self.chosen.filename}")


def installed_wheels(site_packages: Path) -> list[Installed]:
    """Every distribution in ``site_packages`` installed from a wheel (an editable project has no wheel to compare)."""
    found = []
    for info in sorted(site_packages.glob("*.dist-info")):
        try:
            meta = (info / "METADATA").read_text(errors="replace")
            wheel = (info / "WHEEL").read_text(errors="replace")
        except OSError:
            continue
        if (info / "direct_url.json").is_file() and '"editable": true' in (info / "direct_url.json").read_text():
            continue
        name = re.search(r"^Name:\s*(\S+)", meta, re.M)
        version = re.search(r"^Version:\s*(\S+)", meta, re.M)
        tags = frozenset(t for line in re.findall(r"^Tag:\s*(\S+)", wheel, re.M) for t in parse_tag(line))
        if name and version and tags:
            found.append(Installed(canonicalize_name(name.group(1)), version.group(1), tags))
    return found


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, bool]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            attrs = dict(attrs)
            if attrs.get("href"):
                self.found.append((attrs["href"], "data-yanked" in attrs))


def _read(url: str, timeout: float) -> tuple[bytes, str]:
    """The body and content type of ``url`` (file:// or http(s)://); an absent page is empty."""
    if url.startswith("file:"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
        if path.is_dir():
            path = path / "index.html"
        try:
            return path.read_bytes(), "text/html"
        except OSError:
            return b"", "text/html"
    request = urllib.request.Request(url, headers={"Accept": f"{SIMPLE_JSON}, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return b"", "text/html"
        raise


def index_files(index: str, name: str, timeout: float = 30.0) -> list[Candidate]:
    """The files a PEP 503/691 simple index lists for ``name``."""
    page = f"{index.rstrip('/')}/{name}/"
    body, kind = _read(page, timeout)
    if not body:
        return []
    if SIMPLE_JSON in kind:
        return [Candidate(f["filename"], urllib.parse.urljoin(page, f["url"]), bool(f.get("yanked")))
                for f in json.loads(body).get("files", [])]
    parser = _Anchors()
    parser.feed(body.decode("utf-8", errors="replace"))
    files = []
    for href, yanked in parser.found:
        url = urllib.parse.urljoin(page, href)
        files.append(Candidate(urllib.parse.unquote(urllib.parse.urlparse(url).path.rsplit("/", 1)[-1]), url, yanked))
    return files


def flat_files(location: str, timeout: float = 30.0) -> list[Candidate]:
    """The files of a find-links location: a folder, or a page of links."""
    path = Path(urllib.request.url2pathname(urllib.parse.urlparse(location).path)) if location.startswith("file:") \
        else Path(location)
    if "://" not in location or location.startswith("file:"):
        if not path.is_dir():
            return []
        return [Candidate(p.name, p.resolve().as_uri()) for p in sorted(path.iterdir()) if p.is_file()]
    body, _ = _read(location, timeout)
    parser = _Anchors()
    parser.feed(body.decode("utf-8", errors="replace"))
    return [Candidate(urllib.parse.unquote(urllib.parse.urlparse(urllib.parse.urljoin(location, h)).path.rsplit("/", 1)[-1]),
                      urllib.parse.urljoin(location, h), y) for h, y in parser.found]


def tag_rank(tags: Iterable[Tag], supported: Mapping[Tag, int]) -> int | None:
    """pip's priority of a wheel: the position of its best tag among this interpreter's (lower is better); None when
    this interpreter supports none of them."""
    ranks = [supported[t] for t in tags if t in supported]
    return min(ranks) if ranks else None


def pip_choice(version: str, name: str, files: Sequence[Candidate], supported: Mapping[Tag, int]) -> Candidate | None:
    """The wheel pip installs for ``name==version`` among ``files`` (None when no supported wheel of it is listed)."""
    best: tuple[int, Candidate] | None = None
    want = canonicalize_version(version)
    for candidate in files:
        if candidate.yanked or not candidate.filename.endswith(".whl"):
            continue
        try:
            wheel_name, wheel_version, _, tags = parse_wheel_filename(candidate.filename)
        except Exception:  # noqa: BLE001 - a file name no installer can read is no candidate
            continue
        if canonicalize_name(wheel_name) != name or canonicalize_version(str(wheel_version)) != want:
            continue
        rank = tag_rank(tags, supported)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, candidate)
    return best[1] if best else None


def mismatches(site_packages: Path, indexes: Sequence[str], find_links: Sequence[str] = (),
               supported_tags: Sequence[Tag] | None = None, workers: int = 16) -> list[Mismatch]:
    """The installed wheels that rank below the file pip would choose for the same version from these sources."""
    supported = {tag: i for i, tag in enumerate(supported_tags if supported_tags is not None else sys_tags())}
    installed = installed_wheels(site_packages)
    flat = [c for location in find_links for c in flat_files(location)]

    def check(dist: Installed) -> Mismatch | None:
        files = [*flat, *(c for index in indexes for c in index_files(index, dist.name))]
        chosen = pip_choice(dist.version, dist.name, files, supported)
        if chosen is None:
            return None
        have = tag_rank(dist.tags, supported)
        _, _, _, tags = parse_wheel_filename(chosen.filename)
        if have is None or tag_rank(tags, supported) < have:
            best_tag = min(dist.tags, key=lambda t: supported.get(t, len(supported)))
            return Mismatch(dist, str(best_tag), chosen)
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(workers, os.cpu_count() * 8 or 8))) as pool:
        return [m for m in pool.map(check, installed) if m is not None]
