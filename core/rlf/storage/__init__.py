"""What a run keeps on disk: the checkpoint format (no pickle), the state it holds and how it is matched
to a run, and the run directory (ownership, locking, files written without following links)."""
