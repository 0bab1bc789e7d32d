"""The local log (Kafka's LocalLog): segments, the index, append, read, truncation, loading."""
