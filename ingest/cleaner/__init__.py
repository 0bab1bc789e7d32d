"""The broker's log cleaner: key compaction of sealed hot segments (Kafka's LogCleaner)."""
