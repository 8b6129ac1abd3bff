"""scripts/default_run_report.py: the README's default-run figures come from the run's files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "default_run_report", ROOT / "scripts" / "default_run_report.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _record(algo: str, seeds_jct: dict[int, float], **kw: object) -> dict:
    rec = {
        "scenario": "edge50-v1",
        "env_overrides": {},
        "algo": algo,
        "shield": "none",
        "per_episode": [
            {"eval_seed": s, "episode": 0, "jct_mean": j} for s, j in seeds_jct.items()
        ],
    }
    rec.update(kw)
    return rec


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "outputs" / "runs" / "edge50" / "srole_central" / "seed0" / "stamp"
    run.mkdir(parents=True)
    (run / "eval.json").write_text(
        json.dumps(
            {
                "algo": "srole",
                "shield": "central",
                "scenario": "edge50-v1",
                "train_seed": 0,
                "git_commit": "abc",
                "eval_seeds": [10000, 10001],
                "summary": {"jct_mean": 30.0, "jct_p95": 90.0, "collisions_executed": 0.0},
            }
        )
    )
    rows = [
        {
            "wall_time": 10.0 * (i + 1),
            "env_steps": 512 * (i + 1),
            "agent_decisions": 25600 * (i + 1),
        }
        for i in range(4)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_report_quotes_the_run_and_the_recorded_heuristics_on_its_seeds(tmp_path):
    mod = _script()
    base = tmp_path / "baselines.jsonl"
    records = [
        _record("random", {10000: 60.0, 10001: 70.0, 10002: 1.0}),
        _record("least_loaded", {10000: 40.0, 10001: 44.0}),
        # not counted: shielded, another scenario, overrides, a heuristic not compared, and
        # a record missing one of the run's seeds
        _record("least_loaded", {10000: 1.0, 10001: 1.0}, shield="central"),
        _record("random", {10000: 1.0, 10001: 1.0}, scenario="edge10-v1"),
        _record("random", {10000: 1.0, 10001: 1.0}, env_overrides={"pending_slots": 1}),
        _record("fifo", {10000: 1.0, 10001: 1.0}),
    ]
    base.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert mod.baseline_means(base, "edge50-v1", [10000, 10001]) == {
        "random": 65.0,
        "least_loaded": 42.0,
    }
    assert mod.baseline_means(base, "edge50-v1", [10000, 10003]) == {}
    text = mod.report(_run_dir(tmp_path), 60.0, 300.0, base)
    assert "| mean JCT (slots) | 30.00 |" in text
    assert "| updates | 4 |" in text and "| env-steps/s | 51 |" in text
    assert "| `random` on the same seeds (its record), mean JCT | 65.00 |" in text
    assert "| `least_loaded` on the same seeds (its record), mean JCT | 42.00 |" in text
    assert "`random`" not in mod.report(_run_dir(tmp_path / "b"), None, None)
