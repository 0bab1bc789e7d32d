"""The broker's side of tiered storage: its remote-log duties and reads across both tiers."""
