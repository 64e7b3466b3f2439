"""The graphs area: graph capture and replay against eager (README, "Graph capture and replay")."""
