"""The admin CLI, `kcoord` (cli.py), and the blocking client it speaks through (client.py)."""
