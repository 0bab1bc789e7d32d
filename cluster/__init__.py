"""The node runtime every role shares: the metadata cache and its follower, internal HTTP,
authorization, the HTTP layer (cluster/http) and the cold-read contract."""
