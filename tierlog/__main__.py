"""`python -m tierlog`: the command line (tierlog/cli/main.py), in a process of its own."""

import gc

from tierlog.startup import leave_out_dev_only_packages

leave_out_dev_only_packages()

# The command line's imports (pyarrow, SQLAlchemy, httpx, the client: most of a process's
# start-up) make long-lived module objects only, yet each full collection on the way scans all
# of them again: ~10% of that CPU. They are imported with the collector off, then frozen
# (left out of later collections, as ingest/server.py does after a broker's start-up).
gc.disable()
from tierlog.cli.main import main  # noqa: E402  (after the finder: main imports kio, pyarrow)

gc.freeze()
gc.enable()

raise SystemExit(main())
