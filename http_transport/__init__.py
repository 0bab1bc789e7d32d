"""HTTP transports shared by the nodes (cluster.internal_http) and the Python client
(tierlog.client.http): httpx's client API over aiohttp's connections
(`http_transport.aiohttp_transport`), and the TLS contexts they share (`http_transport.trust`).
A library: it imports nothing else from the project. The package itself imports nothing, so
`http_transport.trust` alone (the registry client's, in every Spark task) leaves aiohttp
unloaded."""
