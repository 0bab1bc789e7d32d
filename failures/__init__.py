"""The failure policy: error families (failures/families.py) with
`retriable`, raised by the adapters that meet botocore, SQLAlchemy, pyarrow and OS errors, and
told apart by background duties (cluster/duty.py): an outage backs off, a bug is logged with
its traceback and counted. HTTP statuses and Kafka codes are mapped at the protocol edges."""
