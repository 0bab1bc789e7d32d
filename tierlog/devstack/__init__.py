"""The local stack of `tierlog dev` and the tests: Postgres, an S3 endpoint, child processes."""
