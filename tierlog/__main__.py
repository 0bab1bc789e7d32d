"""`python -m tierlog`: the command line (tierlog/cli/main.py), in a process of its own, started
as tierlog/startup.py says."""

from tierlog.startup import run

raise SystemExit(run())
