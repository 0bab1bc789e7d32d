"""HTTP transports shared by the nodes (cluster.internal_http) and the Python client
(tierlog.client.http): httpx's client API over aiohttp's connections. A library: it imports
nothing else from the project."""

from http_transport.aiohttp_transport import AiohttpTransport

__all__ = ["AiohttpTransport"]
