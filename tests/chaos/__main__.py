"""`python -m tests.chaos --rounds N --seed S`: a chaos run longer than CI's, or a replay;
`--minutes N`: a soak, faults (half of the steps two at once) until N minutes have passed."""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

from tests.chaos.nemesis import FAULTS, KNOWN_BROKEN, select
from tests.chaos.runner import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--rounds", type=int, default=20, help="faults to inject (default 20)")
    parser.add_argument("--seed", type=int, help="the random seed (default: a new one, printed)")
    parser.add_argument("--faults", help=f"comma-separated, of: {', '.join(FAULTS)} (default all)")
    parser.add_argument(
        "--exclude",
        help=f"comma-separated faults to leave out (default, unless --faults is given: "
        f"{KNOWN_BROKEN!r}, open bugs)",
    )
    parser.add_argument(
        "--minutes", type=float, help="a soak: steps go on until this many minutes have passed"
    )
    parser.add_argument(
        "--overlap",
        type=float,
        default=0.5,
        help="the share of steps that are two faults at once (default 0.5; CI's run: 1.0)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs and data dirs")
    args = parser.parse_args(argv)
    try:
        faults = select(args.faults, args.exclude)
    except ValueError as exc:
        parser.error(str(exc))
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    root = Path(tempfile.mkdtemp(prefix="tierlog-chaos-"))
    outcome = run(root, seed, args.rounds, faults, overlap=args.overlap, minutes=args.minutes)
    print(outcome.report())
    if args.keep or outcome.violations:
        print(f"logs and data in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if outcome.violations else 0


if __name__ == "__main__":
    sys.exit(main())
