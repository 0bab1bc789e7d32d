"""The in-process cluster harness: N brokers on one event loop and one manual clock, with
real local logs in a temp dir and the tests' real Postgres (cluster.py)."""
