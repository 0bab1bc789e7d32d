"""tierlog: a Kafka-style commit log whose history lives in object storage."""
