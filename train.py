"""Train a scheduler: ``python train.py algo=<algo> env=<scenario> [key=value ...]``.

The training pipeline (Hydra configs, MAPPO/IPPO, SROLE, logging, checkpoints) is being built
(issues #3 and #5). Until it lands this entry point refuses to pretend: it validates the
scenario you name, prints what exists today, and exits with status 2.
"""

from __future__ import annotations

import sys

import edgesched


def main(argv: list[str]) -> int:
    """Parse ``key=value`` overrides; report that training is not available yet."""
    opts = dict(arg.split("=", 1) for arg in argv if "=" in arg)
    env = opts.get("env", "edge50")
    scenario = edgesched.get_scenario(env)  # unknown names fail here, listing the registry
    print(
        f"edgesched {edgesched.__version__}: training arrives with the training pipeline "
        f"(algo={opts.get('algo', '?')!s}, env={scenario.id}).\n"
        "Nothing was trained. Available now: the environments, e.g.\n"
        f"  edgesched.make_parallel({env!r})  or  gymnasium.make({scenario.gym_id!r})",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
