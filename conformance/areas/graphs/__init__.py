"""The graphs area: graph capture and replay against eager (docs/areas/graphs.md)."""
