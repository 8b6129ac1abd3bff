#!/usr/bin/env python3
"""Derive edgesched's co-location table from measured costs of sharing GPUs, CPUs and memory.

Reads ``--data-dir`` (default ``<repo>/../shared/data``) and writes
``edgesched/envs/data/colocation.json``: only numbers taken or computed from

* Gavel (Narayanan et al., OSDI'20), ``colocation/gavel_physical_cluster_throughputs.json``:
  steps/s of single-GPU jobs alone and when two share one GPU, on K80, P100 and V100; a pair
  stored as ``[0, 0]`` is one whose shared run failed (out of memory, see SOURCE.txt);
* Synergy (Mohan et al., OSDI'22), ``colocation/synergy_cpu_mem_throughput.csv``: throughput
  of one-GPU jobs against the CPU cores given, relative to 3 cores per GPU;
* Muri (Zhao et al., SIGCOMM'22), ``colocation/muri_packing_overhead.csv`` (iteration-time
  multiplier when 1..4 jobs interleave on the same GPUs) and
  ``colocation/muri_restart_overhead_s.csv`` (seconds per (re)start by model and GPU count).

The catalog's six models are not the measured jobs; :data:`MODEL_MAP` declares, for each, the
measured job it stands for in each data set and why. No data file is copied.

Usage::

    python scripts/derive_colocation.py            # (re)write the JSON
    python scripts/derive_colocation.py --check    # exit 1 if the committed JSON is stale

Deterministic; floats rounded to 6 significant digits (the profile table's rule).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the profile derivation's readers and rounding (scripts/ is a folder of scripts)
from derive_profiles import DataError, load_gavel, round_tree

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT / ".." / "shared" / "data"
DEFAULT_OUT = REPO_ROOT / "edgesched" / "envs" / "data" / "colocation.json"
SCHEMA_VERSION = 1
GENERATED_BY = "scripts/derive_colocation.py"

#: The catalog's models (``profiles.json``, index order) -> the measured job standing for each.
#: Gavel: the same architecture at the batch size nearest (in log scale) the catalog's
#: ``local_bsz`` where Gavel measured it; otherwise the nearest architecture, marked assumed.
#: Synergy: the same architecture's CPU curve, else the nearest input pipeline (assumed).
#: Muri: the same model's restart overhead, else the nearest model size (assumed).
MODEL_MAP: dict[str, dict[str, str]] = {
    "bert": {
        "gavel": "Transformer (batch size 16)",  # assumed: Gavel has no BERT; nearest batch 16
        "synergy": "bert",
        "muri": "bert",
    },
    "cifar10": {
        "gavel": "ResNet-18 (batch size 256)",  # Pollux's CIFAR-10 job is ResNet-18, bsz 182
        "synergy": "res18",
        "muri": "resnet18",
    },
    "deepspeech2": {
        "gavel": "LM (batch size 20)",  # assumed: an LSTM language model; recurrent like DS2
        "synergy": "deepspeech",
        "muri": "gpt2",  # assumed: a sequence model of similar size (10 s, as bert)
    },
    "imagenet": {
        "gavel": "ResNet-50 (batch size 64)",  # Pollux's ImageNet job is ResNet-50, bsz 57
        "synergy": "res50",
        "muri": "vgg16",  # assumed: Muri profiled no ResNet-50; the nearest large CNN
    },
    "ncf": {
        "gavel": "Recommendation (batch size 1024)",  # NCF-style recommender, bsz 1025
        "synergy": "transformer",  # assumed: no recommender; pre-tokenized ids, flat curve
        "muri": "shufflenet_v2_x1_0",  # assumed: a small model (4-8 s)
    },
    "yolov3": {
        "gavel": "ResNet-50 (batch size 16)",  # assumed: CNN detector on a ResNet-like trunk
        "synergy": "res50",  # assumed: an image pipeline with decoding and augmentation
        "muri": "vgg19",  # assumed: the nearest large CNN
    },
}

#: Alternative readings of the assumed Gavel entries above, for sensitivity studies
#: (``SimConfig.gavel_model_map``). ``largest_batch``: each assumed entry at its stand-in
#: architecture's largest measured batch size, the most memory-hungry reading and the one
#: whose pairs fail most (ResNet-50 at batch 128 fails with every partner on K80). The
#: entries backed by a matching architecture stay as declared.
GAVEL_MAP_ALTERNATIVES: dict[str, dict[str, str]] = {
    "largest_batch": {
        "bert": "Transformer (batch size 256)",
        "deepspeech2": "LM (batch size 80)",
        "yolov3": "ResNet-50 (batch size 128)",
    },
}

#: Measured GPU classes; the catalog's tiers map onto them in ``edgesched.envs.colocation``.
GPU_CLASSES: tuple[str, ...] = ("k80", "p100", "v100")

CITATIONS: dict[str, str] = {
    "gavel": (
        "Narayanan et al., Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning "
        "Workloads (Gavel), OSDI'20; github.com/stanford-futuredata/gavel "
        "c4fa40097339e9608ab71fd64c8bdea96a5e4a4c scheduler/physical_cluster_throughputs.json "
        "(MIT)"
    ),
    "synergy": (
        "Mohan et al., Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters "
        "(Synergy), OSDI'22; github.com/msr-fiddle/synergy "
        "1bb2bed6edc9c5f953d0b7f0a40e4fdad053489c simulator/models/ (MIT)"
    ),
    "muri": (
        "Zhao et al., Multi-Resource Interleaving for Deep Learning Training (Muri), "
        "SIGCOMM'22; github.com/Rivendile/Muri 4e69a78ce75f629a5a00abd48150a1860b341ce6 "
        "simulator/run_sim.py, simulator/jobs.py (Apache-2.0)"
    ),
}


def pair_table(
    gavel: dict[str, Any],
    gpu: str,
    models: Sequence[str],
    gavel_map: dict[str, str] | None = None,
) -> list[list[list[float]]]:
    """Relative throughputs of each ordered pair of catalog models sharing one ``gpu``.

    ``gavel_map`` (catalog model -> Gavel job) defaults to :data:`MODEL_MAP`'s entries.

    Returns:
        ``t[a][b] = [r_a, r_b]``: each job's steps/s when ``a`` and ``b`` share one GPU over
        its steps/s alone; ``[0, 0]`` where the shared run failed.

    Raises:
        DataError: a mapped job or pair is not in the measurements.
    """
    table = gavel[gpu]
    job = gavel_map or {m: MODEL_MAP[m]["gavel"] for m in models}
    out = []
    for a in models:
        ka = (job[a], 1)
        if ka not in table:
            raise DataError(f"gavel [{gpu}]: no single-GPU job {ka[0]!r} (model {a})")
        entry = table[ka]
        iso_a = float(entry["null"])
        row = []
        for b in models:
            kb = (job[b], 1)
            iso_b = float(table[kb]["null"])
            pair = entry.get(repr(kb))
            if pair is None:
                raise DataError(f"gavel [{gpu}][{ka}]: no pair with {kb}")
            ta, tb = float(pair[0]), float(pair[1])
            if ta <= 0.0 or tb <= 0.0:
                row.append([0.0, 0.0])
            else:
                row.append([ta / iso_a, tb / iso_b])
        out.append(row)
    return out


def failing_partners(gavel: dict[str, Any], gpu: str) -> dict[str, tuple[int, int]]:
    """Per single-GPU job on ``gpu``: (partners its shared run failed with, partners)."""
    out = {}
    for (name, scale), entry in gavel[gpu].items():
        if scale != 1:
            continue
        pairs = [p for k, p in entry.items() if k != "null" and k.endswith(", 1)")]
        out[name] = (sum(float(p[0]) <= 0.0 for p in pairs), len(pairs))
    return out


def failed_pair_share(gavel: dict[str, Any], gpu: str) -> float:
    """Share of all measured single-GPU pairs on ``gpu`` whose shared run failed."""
    n = bad = 0
    for (_, scale), entry in gavel[gpu].items():
        if scale != 1:
            continue
        for key, pair in entry.items():
            if key == "null" or not key.endswith(", 1)"):
                continue
            n += 1
            bad += float(pair[0]) <= 0.0
    return bad / n if n else 0.0


def cpu_curves(path: Path, models: Sequence[str]) -> dict[str, list[list[float]]]:
    """Per catalog model: ``[[cores, throughput relative to 3 cores], ...]`` of a 1-GPU job.

    At each core count the best throughput over the memory sizes Synergy measured is kept
    (host memory is modelled separately: over capacity, a job crashes).
    """
    best: dict[str, dict[float, float]] = defaultdict(dict)
    with path.open(newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            try:
                if int(row["gpus"]) != 1:
                    continue
                c, t = float(row["cpus"]), float(row["throughput_norm"])
            except (KeyError, ValueError):
                raise DataError(f"{path}:{i}: malformed row") from None
            m = row["model"]
            best[m][c] = max(best[m].get(c, 0.0), t)
    out = {}
    for name in models:
        src = MODEL_MAP[name]["synergy"]
        if src not in best:
            raise DataError(f"{path}: no one-GPU curve for {src!r} (model {name})")
        out[name] = [[c, best[src][c]] for c in sorted(best[src])]
    return out


def restart_overheads(path: Path, models: Sequence[str]) -> dict[str, Any]:
    """Per catalog model: restart seconds at each GPU count Muri profiled."""
    by: dict[str, dict[int, float]] = defaultdict(dict)
    with path.open(newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            try:
                by[row["model"]][int(row["gpus"])] = float(row["restart_overhead_s"])
            except (KeyError, ValueError):
                raise DataError(f"{path}:{i}: malformed row") from None
    gpus = sorted({g for v in by.values() for g in v})
    out: dict[str, Any] = {"gpus": gpus}
    for name in models:
        src = MODEL_MAP[name]["muri"]
        if src not in by or sorted(by[src]) != gpus:
            raise DataError(f"{path}: no complete row for {src!r} (model {name})")
        out[name] = [by[src][g] for g in gpus]
    return out


def packing_multipliers(path: Path) -> list[float]:
    """Iteration-time multiplier of k = 1, 2, ... jobs interleaved, relative to one job."""
    rows = {}
    with path.open(newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            try:
                rows[int(row["jobs_packed_per_gpu"])] = float(row["iteration_time_multiplier"])
            except (KeyError, ValueError):
                raise DataError(f"{path}:{i}: malformed row") from None
    ks = sorted(rows)
    if ks != list(range(1, len(ks) + 1)):
        raise DataError(f"{path}: need rows for 1..k jobs, got {ks}")
    # Muri writes them relative to its first entry (1.015): one job alone is 1
    return [rows[k] / rows[1] for k in ks]


def build_table(data_dir: Path) -> dict[str, Any]:
    """The whole co-location table from ``data_dir``."""
    col = data_dir / "colocation"
    for name in (
        "gavel_physical_cluster_throughputs.json",
        "synergy_cpu_mem_throughput.csv",
        "muri_packing_overhead.csv",
        "muri_restart_overhead_s.csv",
    ):
        if not (col / name).is_file():
            raise DataError(f"{col / name}: missing")
    profiles = json.loads((REPO_ROOT / "edgesched" / "envs" / "data" / "profiles.json").read_text())
    models = sorted(profiles["models"])
    if sorted(MODEL_MAP) != models:
        raise DataError(f"MODEL_MAP covers {sorted(MODEL_MAP)}, the catalog has {models}")
    gavel = load_gavel(col / "gavel_physical_cluster_throughputs.json")
    declared = {m: MODEL_MAP[m]["gavel"] for m in models}
    table = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": GENERATED_BY,
        "citations": CITATIONS,
        "models": models,
        "model_map": {m: MODEL_MAP[m] for m in models},
        "gpu_classes": list(GPU_CLASSES),
        "pair_tput": {g: pair_table(gavel, g, models) for g in GPU_CLASSES},
        "gavel_map_alternatives": {
            name: {
                "gavel": alt,
                "pair_tput": {
                    g: pair_table(gavel, g, models, {**declared, **alt}) for g in GPU_CLASSES
                },
            }
            for name, alt in GAVEL_MAP_ALTERNATIVES.items()
        },
        "failed_pair_share_all_jobs": {g: failed_pair_share(gavel, g) for g in GPU_CLASSES},
        "interleave_multiplier": packing_multipliers(col / "muri_packing_overhead.csv"),
        "restart_s": restart_overheads(col / "muri_restart_overhead_s.csv", models),
        "cpu_curve": cpu_curves(col / "synergy_cpu_mem_throughput.csv", models),
    }
    return round_tree(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or ``--check``) the table; 0 ok, 1 stale, 2 data error."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--check", action="store_true", help="compare with --out instead of writing")
    args = p.parse_args(argv)
    try:
        table = build_table(args.data_dir.resolve())
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(table, indent=1) + "\n"
    if args.check:
        if not args.out.is_file() or args.out.read_text() != text:
            print(f"{args.out} differs from the table recomputed from the data", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
