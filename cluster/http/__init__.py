"""The HTTP layer every node serves through: server, connection guard, auth, limits, responses."""
