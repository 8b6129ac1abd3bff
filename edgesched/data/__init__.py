"""Real public data the data-driven scenarios read: registry, per-user cache and fetching.

Three scenarios replay real measurements that edgesched does not ship (``melbourne125``,
``edge50-philly``, ``edge50-trace``). Each file they read is registered here with the public
URL it comes from (pinned to a commit), its SHA-256, license and citation. ::

    python -m edgesched.data list                 # what exists and which scenario reads it
    python -m edgesched.data fetch                # download all into the per-user cache
    python -m edgesched.data fetch --only philly  # just one entry
    python -m edgesched.data status               # where the data folder is, what it holds

Files are downloaded with pooch (SHA-256 checked, retried; a download whose hash does not
match is deleted, never kept) into the per-user cache, laid out like the real-data folder,
so :func:`find_data_dir` finds it there.

Environment variables:
    ``EDGESCHED_DATA_DIR``: the real-data folder to use; ``none`` means no folder at all
    (behave like a machine without data, even next to ``../shared/data`` or a filled cache).
    ``EDGESCHED_CACHE_DIR``: the fetch cache (default ``platformdirs.user_cache_dir``).
    ``EDGESCHED_DATA_MIRROR``: base URL to download from instead of the original URLs;
    ``<mirror>/<path>`` for each file (``file://`` URLs and plain folders work too).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlparse
from urllib.request import url2pathname

ENV_DATA_DIR = "EDGESCHED_DATA_DIR"
"""Environment variable naming the real-data folder (``none``: no folder at all)."""
ENV_CACHE_DIR = "EDGESCHED_CACHE_DIR"
"""Environment variable overriding the fetch cache folder."""
ENV_MIRROR = "EDGESCHED_DATA_MIRROR"
"""Environment variable with a mirror base URL that replaces the original URLs."""
NO_DATA = "none"
"""Value of ``EDGESCHED_DATA_DIR`` (or ``data_dir``) that disables every real-data folder."""
FETCH_COMMAND = "python -m edgesched.data fetch"
"""The command that downloads the registered files (``--only NAME`` for a subset)."""

_RAW = "https://raw.githubusercontent.com"
_POLLUX = f"{_RAW}/petuum/adaptdl/c793c7089bd307462686339d29707925c461f9a9/simulator"
_POLLUX_LICENSE = "Apache-2.0 (Pollux artifact, petuum/adaptdl)"
_POLLUX_CITE = (
    "Qiao et al., Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep "
    "Learning, OSDI 2021"
)


@dataclass(frozen=True)
class DataFile:
    """One registered public data file.

    Attributes:
        name: registry key, used by ``fetch --only`` and :attr:`Scenario.data`.
        path: path relative to the real-data folder (POSIX separators); the fetch cache and
            ``../shared/data`` share this layout.
        url: original public URL, pinned to a commit.
        sha256: hex SHA-256 of the file; a download that does not match is rejected.
        size: size in bytes (for listings).
        license: license of the data.
        citation: what to cite when you use it.
        description: one line: what the file holds.
    """

    name: str
    path: str
    url: str
    sha256: str
    size: int
    license: str
    citation: str
    description: str


DATA_FILES: Mapping[str, DataFile] = MappingProxyType(
    {
        f.name: f
        for f in (
            DataFile(
                name="philly",
                path="pollux-osdi21/traces/philly.csv",
                url=f"{_POLLUX}/traces/philly.csv",
                sha256="ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da",
                size=3_444_496,
                license="CC BY 4.0 (Microsoft Philly traces); " + _POLLUX_LICENSE,
                citation="Jeon et al., Analysis of Large-Scale Multi-Tenant GPU Clusters for "
                "DNN Training Workloads, USENIX ATC 2019; " + _POLLUX_CITE,
                description="82,247 jobs of Microsoft's Philly GPU cluster (2017), as shipped "
                "with the Pollux artifact",
            ),
            DataFile(
                name="pollux-workload-1",
                path="pollux-osdi21/workloads/workload-1.csv",
                url=f"{_POLLUX}/workloads/workload-1.csv",
                sha256="0bff9c3a36b52c7025484b666d788001b1478cc4d84be409ca04b28f58f9d162",
                size=4_770,
                license=_POLLUX_LICENSE,
                citation=_POLLUX_CITE,
                description="160 Philly-sampled jobs with their models and GPU counts",
            ),
            DataFile(
                name="eua-melbcbd",
                path="eua/site-optus-melbCBD.csv",
                url=f"{_RAW}/PhuLai/eua-dataset/61238e00a6f01019c8a6ba1619675337a879a3d4/"
                "edge-servers/site-optus-melbCBD.csv",
                sha256="c1031a8ff0f110e179beeabfaea53d42c15f30b0daf6c6522e8f17789c3979fb",
                size=14_735,
                license="MIT (EUA dataset); base-station site data owned by ACMA, ACMA terms",
                citation="Lai et al., Optimal Edge User Allocation in Edge Computing with "
                "Variable Sized Vector Bin Packing, ICSOC 2018",
                description="125 Optus base-station sites of Melbourne CBD with coordinates",
            ),
            DataFile(
                name="topology-zoo",
                path="topology-zoo/gml.tar.gz",
                url=f"{_RAW}/mroughan/InternetTopologyZoo/"
                "a725bbc4763bf1d0eaea64089ba00c2fe9427fe3/gml.tar.gz",
                sha256="ccdb26338f4e118ef291e83adea6c75b839700b065d5e69ec13c929c4e1f2f71",
                size=348_613,
                license="CC BY 4.0",
                citation="Knight et al., The Internet Topology Zoo, IEEE JSAC 2011",
                description="276 real network graphs (GML) with link capacities where known",
            ),
        )
    }
)
"""Every registered data file by name."""


class DataFetchError(RuntimeError):
    """A registered file could not be downloaded, or its SHA-256 did not match."""


def get_data_file(name: str) -> DataFile:
    """The registry entry ``name``.

    Raises:
        KeyError: unknown name, listing the registered ones.
    """
    try:
        return DATA_FILES[name]
    except KeyError:
        raise KeyError(
            f"unknown data name {name!r}; registered data: {sorted(DATA_FILES)}"
        ) from None


def data_file_for_path(path: str | os.PathLike[str]) -> DataFile | None:
    """The registry entry whose relative path is ``path``, or ``None``."""
    key = Path(path).as_posix()
    for f in DATA_FILES.values():
        if f.path == key:
            return f
    return None


def cache_dir() -> Path:
    """The fetch cache: ``$EDGESCHED_CACHE_DIR``, else the per-user cache of edgesched.

    The folder may not exist yet; :func:`fetch` creates it.
    """
    env = os.environ.get(ENV_CACHE_DIR, "")
    if env:
        return Path(os.path.expanduser(env))
    import platformdirs

    return Path(platformdirs.user_cache_dir("edgesched"))


def _checkout_data_dir() -> Path | None:
    """``../shared/data`` next to the source checkout this package runs from, if any."""
    root = Path(__file__).resolve().parents[2]  # edgesched/data/__init__.py -> checkout
    # only a source checkout (pyproject.toml at its root) has a ../shared/data of its own;
    # an installed package's parent folders are site-packages and the like
    if (root / "pyproject.toml").is_file() and (root.parent / "shared" / "data").is_dir():
        return root.parent / "shared" / "data"
    return None


def locate_data_dir(explicit: str = "") -> tuple[Path | None, str]:
    """Locate the real-data folder and say where it came from.

    Order: ``explicit`` (the ``data_dir`` parameter), then ``$EDGESCHED_DATA_DIR``, then
    ``../shared/data`` next to a source checkout, then the per-user fetch cache filled by
    ``python -m edgesched.data fetch`` (``$EDGESCHED_CACHE_DIR`` overrides its place). An
    explicit folder or ``$EDGESCHED_DATA_DIR``, when set, is the only place looked at, so a
    typo fails instead of silently reading other data; the value ``none`` means no
    real-data folder at all (a machine without data, even next to ``../shared/data``).

    Args:
        explicit: folder given by the caller; empty for none.

    Returns:
        The folder (``None`` when there is none) and a phrase naming its origin, or why
        there is none, for messages.
    """
    for value, origin in ((explicit, "data_dir"), (os.environ.get(ENV_DATA_DIR, ""), None)):
        if not value:
            continue
        origin = origin or f"${ENV_DATA_DIR}"
        if value.strip().lower() == NO_DATA:
            return None, f"{origin}={value!r} disables the real-data folder"
        folder = Path(os.path.expanduser(value))
        if folder.is_dir():
            return folder, f"{origin}={value!r}"
        return None, f"{origin}={value!r} does not exist"
    checkout = _checkout_data_dir()
    if checkout is not None:
        return checkout, "../shared/data next to the source checkout"
    cache = cache_dir()
    if cache.is_dir():
        return cache, "the fetch cache"
    return None, (
        f"no real-data folder found (no data_dir, no ${ENV_DATA_DIR}, no ../shared/data next "
        f"to a source checkout, no fetch cache at {cache})"
    )


def find_data_dir(explicit: str = "") -> Path | None:
    """Locate the real-data folder, or return ``None`` when none exists.

    Looks at ``explicit``, then ``$EDGESCHED_DATA_DIR`` (``none``: no folder), then
    ``../shared/data`` next to a source checkout, then the fetch cache; see
    :func:`locate_data_dir`.
    """
    return locate_data_dir(explicit)[0]


_SCENARIO_DATA: dict[str, tuple[str, ...]] = {}
"""Registered files each scenario reads (its latest version), noted by the scenario registry."""


def note_scenario_data(scenario: str, names: Iterable[str]) -> None:
    """Record which registered files scenario ``scenario`` reads (called when it registers).

    The scenario registry lives in :mod:`edgesched.envs`, which imports this module; it
    tells this registry what it reads, so the command line can list readers without
    importing the simulator.
    """
    _SCENARIO_DATA[scenario] = tuple(names)


def scenario_data() -> Mapping[str, tuple[str, ...]]:
    """Scenario name -> the registered files it reads (scenarios registered so far)."""
    return MappingProxyType(dict(sorted(_SCENARIO_DATA.items())))


def fetch_command(names: Iterable[str] = ()) -> str:
    """The shell command that downloads ``names`` (all registered files when empty)."""
    names = list(dict.fromkeys(names))
    if not names or set(names) == set(DATA_FILES):
        return FETCH_COMMAND
    return f"{FETCH_COMMAND} --only {' '.join(names)}"


def fetch_hint(path: str | os.PathLike[str]) -> str:
    """One sentence telling how to get the file at data-folder path ``path``.

    Empty when ``path`` is not a registered file (a trace of the user's own).
    """
    entry = data_file_for_path(path)
    if entry is None:
        return ""
    return (
        f"download it with `{fetch_command([entry.name])}` (into {cache_dir()}, which is "
        "searched automatically)"
    )


def sha256sum(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of the file at ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_state(folder: str | os.PathLike[str] | None, name: str, check: bool = True) -> str:
    """State of registered file ``name`` in data folder ``folder``.

    Args:
        folder: a real-data folder (``None``: no folder).
        name: registry entry.
        check: verify the SHA-256 (else only whether the file exists).

    Returns:
        ``"ok"``, ``"missing"`` or ``"corrupt"`` (present, wrong SHA-256).
    """
    entry = get_data_file(name)
    if folder is None:
        return "missing"
    p = Path(folder) / entry.path
    if not p.is_file():
        return "missing"
    if check and sha256sum(p) != entry.sha256:
        return "corrupt"
    return "ok"


def mirror_url(mirror: str) -> str:
    """Normalize a mirror: a plain folder becomes a ``file://`` URL; no trailing slash.

    Raises:
        ValueError: ``mirror`` is empty.
    """
    if not mirror:
        raise ValueError("mirror='': need a base URL (https://..., file://...) or a folder")
    scheme = urlparse(mirror).scheme
    # one-letter schemes are Windows drive letters (C:\...), not URLs
    if len(scheme) <= 1:
        mirror = Path(os.path.expanduser(mirror)).resolve().as_uri()
    return mirror.rstrip("/")


def _download_file_url(url: str, output_file: str, pooch: object, check_only: bool = False):
    """Pooch downloader for ``file://`` URLs (pooch knows only http, ftp, sftp and doi)."""
    del pooch  # part of pooch's downloader interface
    src = Path(url2pathname(urlparse(url).path))
    if check_only:
        return src.is_file()
    # pooch hands a temporary path and checks the hash before moving it into the cache
    shutil.copyfile(src, output_file)
    return None


def fetch(
    names: Iterable[str] | None = None,
    *,
    cache: str | os.PathLike[str] | None = None,
    mirror: str | None = None,
    retries: int = 3,
    progress: bool = False,
) -> dict[str, Path]:
    """Download registered files into the cache (those already there with the right hash stay).

    Args:
        names: registry entries (default: all).
        cache: target folder (default: :func:`cache_dir`).
        mirror: base URL (or folder) to download ``<mirror>/<path>`` from instead of the
            original URLs (default: ``$EDGESCHED_DATA_MIRROR``, else the original URLs).
        retries: further attempts after a failed download or a hash mismatch.
        progress: show a progress bar (needs tqdm).

    Returns:
        The local path of each file, by name.

    Raises:
        KeyError: unknown name.
        ValueError: ``retries`` negative.
        DataFetchError: a download failed or its SHA-256 did not match; nothing is kept
            for that file.
    """
    import pooch
    import requests

    if isinstance(names, str):  # one name, not its characters
        names = [names]
    entries = [get_data_file(n) for n in (DATA_FILES if names is None else names)]
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries={retries!r}: need an integer >= 0")
    root = Path(cache) if cache is not None else cache_dir()
    mirror = mirror if mirror is not None else os.environ.get(ENV_MIRROR, "")
    base = mirror_url(mirror) + "/" if mirror else ""
    pup = pooch.create(
        path=root,
        base_url=base,
        registry={f.path: f"sha256:{f.sha256}" for f in entries},
        # without a mirror every file has its own original URL
        urls={} if base else {f.path: f.url for f in entries},
        retry_if_failed=retries,
    )
    out = {}
    for f in entries:
        url = pup.get_url(f.path)
        downloader = _download_file_url if urlparse(url).scheme == "file" else None
        try:
            out[f.name] = Path(pup.fetch(f.path, downloader=downloader, progressbar=progress))
        except (ValueError, OSError, requests.RequestException) as e:
            # pooch: ValueError for a hash mismatch (after its retries), requests' errors for
            # HTTP, OSError for a file mirror or an unwritable cache
            raise DataFetchError(
                f"could not fetch {f.name!r} from {url} into {root / f.path}: {e}"
            ) from e
    return out
