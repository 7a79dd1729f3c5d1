"""`--middleware tests.sentry_setup:sentry` for a worker process: sentry-sdk reporting to $SENTRY_DSN (a
delayed.testing.SentryReceiver the test started), and the middleware."""
import os

import sentry_sdk

from delayed.integrations.sentry import SentryMiddleware

sentry_sdk.init(dsn=os.environ["SENTRY_DSN"])
sentry = SentryMiddleware()
