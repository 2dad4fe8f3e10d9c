import protocol  # noqa: F401  # (its import puts the optional compiled build's finder in place first)
