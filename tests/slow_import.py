"""A task module that takes its time to import: the window before a worker is built."""
import os
import time

print("importing tests.slow_import", flush=True)
time.sleep(float(os.environ.get("SLOW_IMPORT_SECONDS", "2")))


def noop():
    pass
