"""The SQLAlchemy metadata the transaction store's tables share (metadata/transactions.py,
metadata/txn_spans.py), as migration 0014_transactions creates them."""

from sqlalchemy import MetaData

META = MetaData()
