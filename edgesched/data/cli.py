"""Command line of :mod:`edgesched.data` (``python -m edgesched.data --help``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import edgesched  # noqa: F401 - the facade registers the scenarios, which note their data

from . import (
    DATA_FILES,
    ENV_CACHE_DIR,
    ENV_DATA_DIR,
    ENV_MIRROR,
    NO_DATA,
    DataFetchError,
    cache_dir,
    fetch,
    fetch_command,
    file_state,
    find_data_dir,
    get_data_file,
    locate_data_dir,
    scenario_data,
)


def _readers() -> dict[str, list[str]]:
    """Scenarios reading each data entry, by entry name.

    The scenarios note what they read when they register (:func:`note_scenario_data`),
    which importing ``edgesched`` (as ``python -m edgesched.data`` does) has done.
    """
    out: dict[str, list[str]] = {name: [] for name in DATA_FILES}
    for s, names in scenario_data().items():
        for d in names:
            out[d].append(s)
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m edgesched.data",
        description="Real public data read by the data-driven scenarios (melbourne125, "
        "edge50-philly, edge50-trace): list it, download it (SHA-256 checked) into the "
        "per-user cache, and check what is where.",
        epilog=f"Environment: ${ENV_DATA_DIR} (the real-data folder; '{NO_DATA}' = none), "
        f"${ENV_CACHE_DIR} (the cache, default: {cache_dir()}), ${ENV_MIRROR} (a mirror "
        "base URL).",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="the registered files: source, license, readers, state")
    sub.add_parser("status", help="where the real-data folder and the cache are, with checksums")
    f = sub.add_parser("fetch", help="download registered files into the cache")
    f.add_argument(
        "--only",
        nargs="+",
        choices=sorted(DATA_FILES),
        metavar="NAME",
        help=f"just these entries (of {', '.join(sorted(DATA_FILES))}); default: all",
    )
    f.add_argument(
        "--mirror",
        default=None,
        help=f"download <MIRROR>/<path> instead of the original URLs (https://, file:// or a "
        f"folder laid out like the data folder); default: ${ENV_MIRROR}",
    )
    f.add_argument(
        "--cache-dir",
        default=None,
        help=f"download into this folder (default: ${ENV_CACHE_DIR}, else {cache_dir()})",
    )
    f.add_argument("--retries", type=int, default=3, help="further attempts per file (default: 3)")
    return ap


def _cmd_list() -> int:
    data = find_data_dir()
    readers = _readers()
    for entry in DATA_FILES.values():
        size = f"{entry.size / 1e6:.1f} MB" if entry.size >= 1e5 else f"{entry.size / 1e3:.1f} kB"
        print(f"{entry.name}: {entry.path} ({size})")
        print(f"  {entry.description}")
        print(f"  read by:  {', '.join(readers[entry.name]) or '-'}")
        print(f"  source:   {entry.url}")
        print(f"  license:  {entry.license}")
        print(f"  cite:     {entry.citation}")
        print(f"  here:     {file_state(data, entry.name, check=False)}")
    print(f"real-data folder: {data or 'none'}; fetch with `{fetch_command()}`")
    return 0


def _cmd_status() -> int:
    data, origin = locate_data_dir()
    cache = cache_dir()
    print(f"real-data folder: {data or 'none'} ({origin})")
    print(f"fetch cache:      {cache}{'' if cache.is_dir() else ' (absent)'}")
    width = max(map(len, DATA_FILES))
    print(f"{'':{width}}  {'data folder':11}  {'cache':7}  path")
    for entry in DATA_FILES.values():
        here = file_state(data, entry.name)
        cached = file_state(cache, entry.name)
        print(f"{entry.name:{width}}  {here:11}  {cached:7}  {entry.path}")
    missing: dict[str, None] = {}  # ordered set
    for s, names in scenario_data().items():
        if names:
            lack = [
                n for n in names if data is None or not (data / get_data_file(n).path).is_file()
            ]
            print(f"scenario {s}: {'ready' if not lack else 'missing ' + ', '.join(lack)}")
            missing.update(dict.fromkeys(lack))
    if missing:
        print(f"get the missing data with `{fetch_command(missing)}`")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    names = args.only or list(DATA_FILES)
    if args.retries < 0:
        print(f"error: --retries={args.retries}: need an integer >= 0", file=sys.stderr)
        return 2
    cache = args.cache_dir if args.cache_dir is not None else cache_dir()
    before = {n: file_state(cache, n) for n in names}
    try:
        paths = fetch(names, cache=cache, mirror=args.mirror, retries=args.retries)
    except DataFetchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # a bad --mirror
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name}: {'already there' if before[name] == 'ok' else 'fetched'}: {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad arguments).

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).
    """
    args = _parser().parse_args(argv)
    if args.command == "list":
        return _cmd_list()
    if args.command == "status":
        return _cmd_status()
    return _cmd_fetch(args)
