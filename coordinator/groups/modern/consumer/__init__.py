"""KIP-848 consumer groups (ConsumerGroupHeartbeat), and classic members in them: groups that
change protocol online (migration.py)."""
