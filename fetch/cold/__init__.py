"""Cold reads straight from S3: manifest → footers → row groups, caches, prefetch, deadlines."""
