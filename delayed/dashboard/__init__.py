"""The documented `python -m delayed.dashboard` and `delayed.dashboard.create_app`: the dashboard
lives in delayed.ops.dashboard."""
from ..ops.dashboard import create_app

__all__ = ["create_app"]
