"""The judge's side of worker processes: environment, launch, request and reply, the pool, forked templates."""
