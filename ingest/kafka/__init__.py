"""The Kafka wire protocol on a broker, beside HTTP (issue 19): see listener.py."""
