"""The rules both front-ends (HTTP in ingest/api, Kafka in ingest/kafka) apply to produce and
fetch: what a request may decode to, how many headers a record may carry, which timestamps a
topic accepts, how much one fetch may answer, how many entries one request may name. Each
rule lives here once (issue 25's service layer, begun by issue 24); the front-ends translate
its TierlogError into their own answer (an HTTP status, a Kafka error code)."""
