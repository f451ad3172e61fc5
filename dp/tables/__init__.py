"""Statistical tables: groups, measures and private keys (issue 26)."""
