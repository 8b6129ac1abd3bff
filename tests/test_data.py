"""The real-data registry, the fetch cache and ``python -m edgesched.data`` (never the network).

Downloads go through a ``file://`` mirror built in a temporary folder from the registry's
files in the real-data folder; the tests that need those files skip without them, the
others build what they need themselves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import DATA_DIR, needs_data

import edgesched
import edgesched.data as edgesched_data
from edgesched.data import (
    DATA_FILES,
    DataFetchError,
    cache_dir,
    fetch,
    fetch_command,
    file_state,
    mirror_url,
    sha256sum,
)
from edgesched.data.cli import main
from edgesched.envs import ConfigError, get_scenario, list_scenarios
from edgesched.envs import topology as topo
from edgesched.envs.scenarios import Scenario, data_requirements, register_scenario

DATA_SCENARIOS = [s for s in list_scenarios() if get_scenario(s).data]
needs_all_data = needs_data(*DATA_FILES)


def _files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stranger's machine: no $EDGESCHED_DATA_DIR, no ../shared/data, an empty cache path.

    Returns the cache folder (not created).
    """
    cache = tmp_path / "cache"
    monkeypatch.delenv("EDGESCHED_DATA_DIR", raising=False)
    monkeypatch.delenv("EDGESCHED_DATA_MIRROR", raising=False)
    monkeypatch.setenv("EDGESCHED_CACHE_DIR", str(cache))
    monkeypatch.setattr(edgesched_data, "_checkout_data_dir", lambda: None)
    return cache


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    """A mirror folder with copies of the registry's files that the real-data folder holds."""
    root = tmp_path / "mirror"
    for entry in DATA_FILES.values():
        if file_state(DATA_DIR, entry.name, check=False) != "ok":
            continue
        dst = root / entry.path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA_DIR / entry.path, dst)
    return root


# ------------------------------------------------------------------ the registry itself
def test_every_data_scenario_declares_its_files():
    assert {s: get_scenario(s).data for s in DATA_SCENARIOS} == {
        "edge50-philly": ("philly",),
        "edge50-trace": ("pollux-workload-1",),
        "melbourne125": ("eua-melbcbd", "topology-zoo"),
    }
    for name, entry in DATA_FILES.items():
        assert entry.name == name
        assert len(entry.sha256) == 64 and int(entry.sha256, 16) >= 0
        assert entry.url.startswith("https://raw.githubusercontent.com/")
        assert entry.url.split("/")[5] and len(entry.url.split("/")[5]) == 40  # a commit
        assert entry.license and entry.citation


@pytest.mark.parametrize(
    ("params", "data", "match"),
    [
        ({"trace_path": "pollux-osdi21/traces/philly.csv"}, (), r"leaves out \['philly'\]"),
        ({"topology": "eua", "num_nodes": 20}, ("eua-melbcbd",), r"leaves out \['topology-"),
        ({}, ("no-such-data",), r"unregistered data \['no-such-data'\]"),
    ],
)
def test_registering_a_scenario_that_hides_its_data_fails(params, data, match):
    """Scenario.data drives the test skips and the fetch hints, so it cannot be left out."""
    if params.get("topology") == "eua":
        params = {**params, "link_bandwidth_graph": "Aarnet"}
    with pytest.raises(ValueError, match=match):
        register_scenario(Scenario("test-hidden-data", 0, "x", params, data=data))
    assert "test-hidden-data" not in list_scenarios()


@needs_all_data
def test_registry_sha256_and_sizes_match_the_real_data_folder():
    for entry in DATA_FILES.values():
        path = DATA_DIR / entry.path
        assert sha256sum(path) == entry.sha256, entry.name
        assert path.stat().st_size == entry.size, entry.name


# ------------------------------------------------------------------ where the data folder is
def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    import platformdirs

    monkeypatch.delenv("EDGESCHED_CACHE_DIR", raising=False)
    assert cache_dir() == Path(platformdirs.user_cache_dir("edgesched"))
    monkeypatch.setenv("EDGESCHED_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"


def test_search_order_and_the_none_switch(isolated, tmp_path, monkeypatch):
    assert topo.find_data_dir() is None  # the cache does not exist yet
    isolated.mkdir()
    assert topo.locate_data_dir() == (isolated, "the fetch cache")
    checkout = tmp_path / "shared-data"
    checkout.mkdir()
    monkeypatch.setattr(edgesched_data, "_checkout_data_dir", lambda: checkout)
    assert topo.find_data_dir() == checkout  # ../shared/data comes before the cache
    env = tmp_path / "env-data"
    env.mkdir()
    monkeypatch.setenv("EDGESCHED_DATA_DIR", str(env))
    assert topo.find_data_dir() == env
    explicit = tmp_path / "explicit"
    explicit.mkdir()
    assert topo.find_data_dir(str(explicit)) == explicit
    # "none" hides every folder: a machine without data, next to ../shared/data and a cache
    monkeypatch.setenv("EDGESCHED_DATA_DIR", "none")
    folder, origin = topo.locate_data_dir()
    assert folder is None and "EDGESCHED_DATA_DIR='none'" in origin
    assert topo.find_data_dir(str(explicit)) == explicit  # an explicit data_dir still wins
    # a set folder that does not exist is the only place looked at: no silent fallback
    monkeypatch.setenv("EDGESCHED_DATA_DIR", str(tmp_path / "typo"))
    assert topo.locate_data_dir() == (
        None,
        f"$EDGESCHED_DATA_DIR={str(tmp_path / 'typo')!r} does not exist",
    )


@pytest.mark.parametrize("name", DATA_SCENARIOS)
def test_missing_data_error_names_the_fetch_command(name, monkeypatch):
    """Needs no data: with EDGESCHED_DATA_DIR=none every data scenario fails to make, and
    says how to get what it lacks."""
    monkeypatch.setenv("EDGESCHED_DATA_DIR", "none")
    assert all(not r.available for r in data_requirements(name))
    with pytest.raises(ConfigError) as exc:
        edgesched.make_parallel(name)
    msg = str(exc.value)
    assert any(f"`{fetch_command([d])}`" in msg for d in get_scenario(name).data), msg
    assert "python -m edgesched.data fetch --only " in msg
    assert "data_dir" in msg and "$EDGESCHED_DATA_DIR" in msg
    assert "EDGESCHED_DATA_DIR='none'" in msg  # why no folder was used


def test_zoo_error_names_its_fetch_command(monkeypatch):
    monkeypatch.setenv("EDGESCHED_DATA_DIR", "none")
    with pytest.raises(ConfigError, match=r"fetch --only topology-zoo`"):
        topo.topology_zoo_link_speeds("Aarnet")


def test_partly_fetched_cache_serves_what_it_has_and_names_the_rest(isolated):
    """Only edge50-trace's workload is in the cache: edge50-trace makes, edge50-philly
    fails naming the cache and the command for the one file it lacks."""
    src = Path(__file__).parent / "fixtures" / "traces" / "pollux_small.csv"
    dst = isolated / DATA_FILES["pollux-workload-1"].path
    dst.parent.mkdir(parents=True)
    shutil.copyfile(src, dst)
    (trace_req,) = data_requirements("edge50-trace")
    assert trace_req.available and trace_req.location == dst
    assert not data_requirements("edge50-philly")[0].available
    edgesched.make_parallel("edge50-trace").reset(seed=0)
    with pytest.raises(ConfigError) as exc:
        edgesched.make_parallel("edge50-philly")
    msg = str(exc.value)
    assert f"The real-data folder is {isolated} (the fetch cache)" in msg
    assert "`python -m edgesched.data fetch --only philly`" in msg


# ------------------------------------------------------------------ fetching
def test_mirror_may_be_a_folder_or_url(tmp_path):
    assert mirror_url(str(tmp_path)) == tmp_path.resolve().as_uri()
    assert mirror_url("https://example.org/data/") == "https://example.org/data"
    with pytest.raises(ValueError, match=r"mirror=''"):
        mirror_url("")


def test_tampered_download_is_rejected_and_not_kept(isolated, tmp_path, capsys):
    """Needs no data: a mirror file that is not the registered one never lands in the cache,
    neither under its name nor as a leftover temporary file."""
    bad = tmp_path / "bad-mirror"
    entry = DATA_FILES["eua-melbcbd"]
    (bad / entry.path).parent.mkdir(parents=True)
    (bad / entry.path).write_text("SITE_ID,LATITUDE,LONGITUDE\n1,-37.8,144.9\n")
    with pytest.raises(DataFetchError, match=r"eua-melbcbd.*SHA256 hash of downloaded file"):
        fetch(["eua-melbcbd"], mirror=bad.as_uri(), retries=0)
    assert not isolated.exists() or _files_under(isolated) == set()
    assert file_state(isolated, "eua-melbcbd") == "missing"
    # the command line says so and exits 1
    assert main(["fetch", "--only", "eua-melbcbd", "--mirror", str(bad), "--retries", "0"]) == 1
    assert "does not match the known hash" in capsys.readouterr().err
    assert not (isolated / entry.path).exists()


def test_unknown_name_exits_2_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fetch", "--only", "nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err
    for name in DATA_FILES:
        assert name in err


def test_bad_retries_exit_2(capsys):
    assert main(["fetch", "--retries", "-1"]) == 2
    assert "--retries=-1" in capsys.readouterr().err


@needs_data("eua-melbcbd")
def test_only_fetches_that_entry(isolated, mirror, capsys):
    assert main(["fetch", "--only", "eua-melbcbd", "--mirror", mirror.as_uri()]) == 0
    assert _files_under(isolated) == {DATA_FILES["eua-melbcbd"].path}
    assert "eua-melbcbd: fetched" in capsys.readouterr().out
    # a second run finds it there and downloads nothing
    assert main(["fetch", "--only", "eua-melbcbd", "--mirror", mirror.as_uri()]) == 0
    assert "eua-melbcbd: already there" in capsys.readouterr().out


@needs_data("eua-melbcbd")
def test_corrupt_cached_file_is_replaced(isolated, mirror):
    entry = DATA_FILES["eua-melbcbd"]
    (isolated / entry.path).parent.mkdir(parents=True)
    (isolated / entry.path).write_text("truncated")
    assert file_state(isolated, entry.name) == "corrupt"
    # one name as a plain string, a mirror given as a folder
    assert fetch(entry.name, mirror=str(mirror), retries=0) == {entry.name: isolated / entry.path}
    assert file_state(isolated, entry.name) == "ok"


@needs_all_data
def test_fetch_all_through_a_file_mirror_then_every_data_scenario_runs(
    isolated, mirror, monkeypatch, capsys
):
    monkeypatch.setenv("EDGESCHED_DATA_MIRROR", mirror.as_uri())  # the env var, no --mirror
    assert main(["fetch"]) == 0
    # laid out like the data folder, nothing else (no temporary files left behind)
    assert _files_under(isolated) == {e.path for e in DATA_FILES.values()}
    for entry in DATA_FILES.values():
        assert file_state(isolated, entry.name) == "ok"
    assert topo.locate_data_dir() == (isolated, "the fetch cache")
    for name in DATA_SCENARIOS:
        reqs = data_requirements(name)
        assert reqs and all(r.available and isolated in r.location.parents for r in reqs)
        env = edgesched.make_parallel(name)
        obs, _ = env.reset(seed=0)
        assert set(obs) == set(env.agents)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"real-data folder: {isolated} (the fetch cache)" in out
    assert "scenario melbourne125: ready" in out and "missing" not in out


def test_status_and_list_without_data(isolated, monkeypatch, capsys):
    monkeypatch.setenv("EDGESCHED_DATA_DIR", "none")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"fetch cache:      {isolated} (absent)" in out
    assert "scenario edge50-philly: missing philly" in out
    assert "`python -m edgesched.data fetch`" in out  # everything is missing: fetch it all
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for entry in DATA_FILES.values():
        assert entry.url in out and entry.path in out
    assert "read by:  melbourne125" in out
