"""`python -m tierlog`: the command line (tierlog/cli/main.py), in a process of its own."""

import sys

# kio imports Hypothesis whenever it is installed, only to register test strategies for its
# types, and Hypothesis then loads its plugins (trio, pytest): about a third of a broker's
# start-up where the dev extras are installed, as in the test suite's hundreds of server
# processes, for nothing any command uses. Production installs have no Hypothesis; this makes
# a process started from a dev install import what a production one does.
if "hypothesis" not in sys.modules:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # then ImportError

from tierlog.cli.main import main

raise SystemExit(main())
