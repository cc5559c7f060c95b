"""Process state: the counters, what happened to each region, the cache client."""
