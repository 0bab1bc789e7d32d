"""The unified log (Kafka's UnifiedLog): the local log with producer state and its checkpoints."""
