"""The wire format, bytes and names only (no Redis, no I/O): task blobs, key names, and the
dead-letter and tracking records, as go-delayed and keakon/delayed 1.x write and read them."""
