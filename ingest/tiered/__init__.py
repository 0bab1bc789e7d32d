"""The broker's side of tiered storage: its remote-log duties and reads across both tiers.

The duties of Kafka's RemoteLogManager that live on a broker, one class each, each scheduled
by the broker: `segment_registrar` (the leader registers committed sealed segments for the
tiering workers to copy), `local_retention` (each replica deletes what the cold tier holds,
and follows the log start retention moved), with `tiering_gauges` (hot bytes, tiering lag,
what retention must keep). `tier_status` answers describe and a 416 from the cold manifest;
`tiered_fetch` and `fetch_reader` read across both tiers.
"""
