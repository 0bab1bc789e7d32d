"""Replication: the partition's role, ISR, the replica fetcher and leader side, the controller."""
