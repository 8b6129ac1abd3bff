"""Static cluster: node capacities and tiers, topology graph, neighbourhoods, regions.

The cluster is drawn once per scenario from ``topology_seed`` (a real cluster does not change
between episodes); workloads are drawn per episode from the ``reset`` seed.
"""

from __future__ import annotations

import csv
import difflib
import re
import tarfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .catalog import hardware_tiers
from .config import ConfigError, SimConfig

EUA_SITES = "eua/site-optus-melbCBD.csv"
"""Real-data file read by ``topology='eua'`` (path relative to the real-data folder)."""
TOPOLOGY_ZOO = "topology-zoo/gml.tar.gz"
"""Real-data file read by ``link_bandwidth_graph`` (path relative to the real-data folder)."""

INTRA_NODE_GBPS = 100.0
"""Bandwidth between workers on the same node (PCIe/NVLink class); keeps sync time finite."""


@dataclass(frozen=True)
class Cluster:
    """Arrays describing the static cluster (index = node id).

    Attributes:
        capacity: (N, 3) cpu cores, GPUs, memory GiB.
        speed: (N,) compute speed relative to a T4 GPU.
        tier: (N,) index into ``tier_names``.
        tier_names: names of the hardware tiers used.
        pos: (N, 2) positions (unit square, or km for real sites).
        edges: (E, 2) undirected links.
        link_bw: (E,) link bandwidth, Gbit/s.
        link_lat: (E,) link latency, ms.
        pair_bw: (N, N) bottleneck bandwidth of the widest path, Gbit/s (diagonal: intra-node).
        pair_lat: (N, N) latency of the fastest path, ms (diagonal 0).
        neighbors: (N, K+1) placement targets of each agent, itself first, -1 where absent.
        region: (N,) region id of each node.
        boundary: (N,) whether agents of two or more regions can target the node.
    """

    capacity: np.ndarray
    speed: np.ndarray
    tier: np.ndarray
    tier_names: tuple[str, ...]
    pos: np.ndarray
    edges: np.ndarray
    link_bw: np.ndarray
    link_lat: np.ndarray
    pair_bw: np.ndarray
    pair_lat: np.ndarray
    neighbors: np.ndarray
    region: np.ndarray
    boundary: np.ndarray

    @property
    def num_regions(self) -> int:
        """Number of regions."""
        return int(self.region.max()) + 1


# The real-data folder is the data registry's business; these stay importable from here.
from ..data import find_data_dir, locate_data_dir  # noqa: E402


def data_help(path: str, explicit: str = "") -> str:
    """Where the real-data folder is (or why there is none) and how to get file ``path``.

    Args:
        path: the file's path relative to the real-data folder.
        explicit: the ``data_dir`` parameter in effect.
    """
    from ..data import ENV_DATA_DIR, cache_dir, data_file_for_path, fetch_command

    data, origin = locate_data_dir(explicit)
    where = (
        f"The real-data folder is {data} ({origin})"
        if data is not None
        else f"No real-data folder: {origin}"
    )
    entry = data_file_for_path(path)
    if entry is None:  # a file of the user's own
        return (
            f"{where}. Give an absolute path, or set data_dir=... or ${ENV_DATA_DIR} to the "
            "folder it is relative to."
        )
    return (
        f"{where}. Download the file with `{fetch_command([entry.name])}` into the fetch "
        f"cache {cache_dir()} (used when data_dir and ${ENV_DATA_DIR} are unset and no "
        "../shared/data sits next to a source checkout), or set data_dir=... or "
        f"${ENV_DATA_DIR} to a folder that holds {path}."
    )


def missing_data_message(need: str, path: str, explicit: str = "") -> str:
    """Error text for a real-data file that is not there: where we looked and how to get it.

    Args:
        need: what needs the file, e.g. ``"topology='eua'"``.
        path: the file's path relative to the real-data folder.
        explicit: the ``data_dir`` parameter in effect.
    """
    return f"{need} needs {path} from the real-data folder. {data_help(path, explicit)}"


def load_eua_sites(path: Path) -> np.ndarray:
    """Read EUA edge-server sites (``SITE_ID,LATITUDE,LONGITUDE,...``) as (n, 2) lat/lon.

    Raises:
        ValueError: naming file and line for a malformed row.
    """
    out = []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or "LATITUDE" not in header or "LONGITUDE" not in header:
            raise ValueError(f"{path}:1: expected a header with LATITUDE and LONGITUDE columns")
        ilat, ilon = header.index("LATITUDE"), header.index("LONGITUDE")
        for lineno, row in enumerate(reader, start=2):
            try:
                lat, lon = float(row[ilat]), float(row[ilon])
            except (IndexError, ValueError):
                raise ValueError(
                    f"{path}:{lineno}: malformed site row {row!r}; need numeric LATITUDE, LONGITUDE"
                ) from None
            if not (-90 <= lat <= 90 and -180 <= lon <= 180):
                raise ValueError(f"{path}:{lineno}: coordinates ({lat}, {lon}) out of range")
            out.append((lat, lon))
    if not out:
        raise ValueError(f"{path}: no sites")
    return np.array(out)


_SPEED_UNITS = {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3}


def topology_zoo_link_speeds(graph: str, data_dir: str = "") -> np.ndarray:
    """Measured link capacities (Gbit/s) of one Topology Zoo graph (Knight et al., JSAC 2011).

    Reads ``topology-zoo/gml.tar.gz`` from the real-data folder. A link's capacity is its
    ``LinkSpeedRaw`` (bit/s) where recorded, else parsed from ``LinkLabel`` (e.g.
    ``"< 10 Gbps"``: the label's figure, an upper bound the zoo records for the link class).
    Links with neither are skipped.

    Why not ``networkx.read_gml``: a third of the zoo's files repeat an edge without declaring
    a multigraph, which networkx rejects, and only edge attributes are needed here; a scan of
    ``edge [ ... ]`` blocks reads every file.

    Args:
        graph: graph name as in the archive, e.g. ``Aarnet``.
        data_dir: real-data folder (default: auto-detect).

    Returns:
        (L,) capacities in Gbit/s, in file order.

    Raises:
        ConfigError: data folder, archive or graph missing, or no link with a capacity.
    """
    data = find_data_dir(data_dir)
    archive = data / TOPOLOGY_ZOO if data else None
    if archive is None or not archive.is_file():
        raise ConfigError(
            missing_data_message(f"link_bandwidth_graph={graph!r}", TOPOLOGY_ZOO, data_dir)
        )
    st = archive.stat()
    return _zoo_link_speeds(graph, str(archive.resolve()), st.st_mtime_ns).copy()


@lru_cache(maxsize=8)
def _zoo_link_speeds(graph: str, archive_path: str, mtime_ns: int) -> np.ndarray:
    del mtime_ns  # cache key only
    archive = Path(archive_path)
    with tarfile.open(archive) as tf:
        try:
            text = tf.extractfile(f"gml/{graph}.gml").read().decode("utf-8", "replace")
        except KeyError:
            names = sorted(Path(m).stem for m in tf.getnames() if m.endswith(".gml") and "/" in m)
            close = difflib.get_close_matches(graph, names, n=3)
            raise ConfigError(
                f"link_bandwidth_graph={graph!r} is not in {archive}"
                + (f"; did you mean {close}?" if close else f"; it holds {len(names)} graphs")
            ) from None
    speeds = []
    for block in re.findall(r"\bedge\s*\[(.*?)\]", text, flags=re.S):
        raw = re.search(r"LinkSpeedRaw\s+([0-9.eE+]+)", block)
        if raw:
            speeds.append(float(raw.group(1)) * 1e-9)
            continue
        label = re.search(r'LinkLabel\s+"[^"]*?([0-9.]+)\s*([KMGT]?)\s*b(?:ps|it)', block, re.I)
        if label:
            speeds.append(float(label.group(1)) * _SPEED_UNITS[label.group(2).lower()])
    speeds_arr = np.array([v for v in speeds if v > 0])
    if not len(speeds_arr):
        raise ConfigError(
            f"link_bandwidth_graph={graph!r}: no link of that graph records a capacity "
            "(LinkSpeedRaw or LinkLabel); choose a graph that does, e.g. 'Aarnet'"
        )
    return speeds_arr


def _positions(cfg: SimConfig, rng: np.random.Generator) -> np.ndarray:
    if cfg.topology != "eua":
        return rng.random((cfg.num_nodes, 2))
    data = find_data_dir(cfg.data_dir)
    site_file = data / EUA_SITES if data else None
    if site_file is None or not site_file.is_file():
        raise ConfigError(missing_data_message("topology='eua'", EUA_SITES, cfg.data_dir))
    latlon = load_eua_sites(site_file)
    if cfg.num_nodes > len(latlon):
        raise ConfigError(
            f"num_nodes={cfg.num_nodes} exceeds the {len(latlon)} EUA sites in {site_file}"
        )
    latlon = latlon[: cfg.num_nodes]
    # equirectangular projection to km: exact enough over a few km of CBD
    lat0 = np.deg2rad(latlon[:, 0].mean())
    km = np.stack(
        [
            (latlon[:, 1] - latlon[:, 1].mean()) * 111.32 * np.cos(lat0),
            (latlon[:, 0] - latlon[:, 0].mean()) * 110.57,
        ],
        axis=1,
    )
    return km


def _connected(adj: np.ndarray) -> bool:
    seen = np.zeros(len(adj), bool)
    seen[0] = True
    frontier = seen.copy()
    while frontier.any():
        nxt = adj[frontier].any(axis=0) & ~seen
        seen |= nxt
        frontier = nxt
    return bool(seen.all())


def _links(cfg: SimConfig, pos: np.ndarray, rng: np.random.Generator):
    n = len(pos)
    dist = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    if cfg.topology == "full" or n == 1:
        adj = ~np.eye(n, dtype=bool)
    else:
        # Smallest radius (growing geometrically from the connectivity threshold of random
        # geometric graphs) that connects the graph.
        scale = dist.max()
        r = scale * np.sqrt(np.log(n) / (np.pi * n))
        while True:
            adj = (dist <= r) & ~np.eye(n, dtype=bool)
            if _connected(adj):
                break
            r *= 1.15
    iu, ju = np.nonzero(np.triu(adj))
    edges = np.stack([iu, ju], axis=1)
    if cfg.link_bandwidth_graph:
        speeds = topology_zoo_link_speeds(cfg.link_bandwidth_graph, cfg.data_dir)
        bw = rng.choice(speeds, size=len(edges))
    else:
        lo, hi = cfg.link_bandwidth_gbps
        bw = np.exp(rng.uniform(np.log(lo), np.log(hi), len(edges)))
    dmax = max(dist[iu, ju].max(initial=0.0), 1e-12)
    llo, lhi = cfg.link_latency_ms
    lat = llo + (lhi - llo) * dist[iu, ju] / dmax
    return edges, bw, lat


def _all_pairs(n: int, edges: np.ndarray, bw: np.ndarray, lat: np.ndarray):
    """Fastest-path latency (min-plus) and widest-path bandwidth (max-min), Floyd-Warshall."""
    pl = np.full((n, n), np.inf)
    pb = np.zeros((n, n))
    pl[edges[:, 0], edges[:, 1]] = pl[edges[:, 1], edges[:, 0]] = lat
    pb[edges[:, 0], edges[:, 1]] = pb[edges[:, 1], edges[:, 0]] = bw
    np.fill_diagonal(pl, 0.0)
    for k in range(n):
        np.minimum(pl, pl[:, k : k + 1] + pl[k : k + 1, :], out=pl)
        np.maximum(pb, np.minimum(pb[:, k : k + 1], pb[k : k + 1, :]), out=pb)
    np.fill_diagonal(pb, INTRA_NODE_GBPS)
    return pb, pl


def _regions(pos: np.ndarray, region_size: int, rng: np.random.Generator) -> np.ndarray:
    """Spatially contiguous regions by k-means (Lloyd) with farthest-point initialisation."""
    n = len(pos)
    k = max(1, round(n / region_size))
    centers = [pos[rng.integers(n)]]
    for _ in range(1, k):
        d = np.min(np.linalg.norm(pos[:, None] - np.array(centers)[None], axis=-1), axis=1)
        centers.append(pos[int(np.argmax(d))])
    c = np.array(centers)
    label = np.zeros(n, dtype=np.int64)
    for _ in range(50):
        label = np.argmin(np.linalg.norm(pos[:, None] - c[None], axis=-1), axis=1)
        new = np.array([pos[label == j].mean(0) if (label == j).any() else c[j] for j in range(k)])
        if np.allclose(new, c):
            break
        c = new
    # relabel to 0..R-1 without gaps
    _, label = np.unique(label, return_inverse=True)
    return label.astype(np.int64)


def build_cluster(cfg: SimConfig) -> Cluster:
    """Draw the static cluster of a scenario from ``cfg.topology_seed``.

    Args:
        cfg: the scenario configuration.

    Returns:
        The cluster arrays.
    """
    rng = np.random.default_rng(cfg.topology_seed)
    n = cfg.num_nodes
    tiers = hardware_tiers()
    if cfg.custom_capacities:
        capacity = np.array(cfg.custom_capacities, dtype=np.float64)
        speed = np.array(cfg.custom_speeds or (1.0,) * n, dtype=np.float64)
        tier_names: tuple[str, ...] = ("custom",)
        tier = np.zeros(n, dtype=np.int64)
    else:
        for name, _ in cfg.tier_mix:
            if name not in tiers:
                raise ConfigError(
                    f"tier_mix names unknown tier {name!r}; declared tiers: {sorted(tiers)}"
                )
        tier_names = tuple(name for name, _ in cfg.tier_mix)
        w = np.array([wt for _, wt in cfg.tier_mix], dtype=np.float64)
        tier = rng.choice(len(tier_names), size=n, p=w / w.sum())
        capacity = np.array(
            [[tiers[t].cpu, tiers[t].gpu, tiers[t].mem] for t in tier_names], dtype=np.float64
        )[tier]
        speed = np.array([tiers[t].speed for t in tier_names])[tier]
    pos = _positions(cfg, rng)
    edges, bw, lat = _links(cfg, pos, rng)
    pair_bw, pair_lat = _all_pairs(n, edges, bw, lat)
    # Nearest reachable by path latency; the node itself (latency 0) sorts first.
    key = pair_lat.copy()
    np.fill_diagonal(key, -1.0)  # itself first even when links have zero latency
    order = np.lexsort((np.broadcast_to(np.arange(n), (n, n)), key), axis=1)
    neighbors = order[:, : cfg.neighbors_k + 1].astype(np.int64)
    reachable = np.take_along_axis(pair_lat, neighbors, axis=1) < np.inf
    neighbors[~reachable] = -1
    region = _regions(pos, cfg.region_size, rng)
    # boundary: targetable by agents of >= 2 regions
    agent_region = np.broadcast_to(region[:, None], neighbors.shape)
    valid = neighbors >= 0
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, -1)
    np.minimum.at(lo, neighbors[valid], agent_region[valid])
    np.maximum.at(hi, neighbors[valid], agent_region[valid])
    boundary = (hi >= 0) & (lo != hi)
    return Cluster(
        capacity=capacity,
        speed=speed,
        tier=tier.astype(np.int64),
        tier_names=tier_names,
        pos=pos,
        edges=edges,
        link_bw=bw,
        link_lat=lat,
        pair_bw=pair_bw,
        pair_lat=pair_lat,
        neighbors=neighbors,
        region=region,
        boundary=boundary,
    )
