"""Many samples: rows in flight, limits on calls, shared embedding requests."""
