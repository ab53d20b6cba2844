"""The SQLite history: the only place with SQL."""
