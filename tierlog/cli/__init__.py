"""The `tierlog` command line: server roles (imported lazily) and client commands."""
