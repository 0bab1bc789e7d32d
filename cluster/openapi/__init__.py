"""The OpenAPI 3.1 document brokers and fetch nodes serve at /openapi.json."""
