"""Judge <-> worker frames, the shared memory block, reading a worker's scratch folder."""
