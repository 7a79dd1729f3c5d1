"""What every long-running role shares: its lifecycle (signals, stop), its role loop, the backoff that
rides out a Redis outage, and the command-line plumbing (options, a checked connection, one-line errors)."""
