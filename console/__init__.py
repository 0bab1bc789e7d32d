"""The web console (`tierlog console`): server-rendered pages over the cluster's public HTTP
API, called with the signed-in user's API key. It imports no server package."""
