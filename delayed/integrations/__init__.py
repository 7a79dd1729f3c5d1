"""Middleware for the tools users watch their tasks with, each an extra of its own: tracing
(`delayed.integrations.opentelemetry`, `pip install 'delayed[opentelemetry]'`) and error reports
(`delayed.integrations.sentry`, `pip install 'delayed[sentry]'`).

Each module imports its tool when it is imported, so import the one you use; this package imports neither.
They are built on the public middleware (`delayed.Middleware`) alone, and send no Redis command.
"""
