"""How far this host's clock is from Redis's, said when it goes past a second and when it is back:
the scheduler's ticks follow Redis's clock, so an operator learns of the skew without it costing a tick."""
import logging

OFF = 1.0
"""Seconds between this host's clock and Redis's past which the scheduler says so."""
BACK = 0.5
"""Seconds within which it is back: below OFF, so an offset hovering at OFF is not said every round."""


class ClockSkew:
    """Says once, as a WARNING, that this host's clock is more than OFF seconds from Redis's, and once,
    as INFO, that it is back within BACK; silent in between, however many rounds see it."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self.off = False

    def saw(self, offset: float) -> None:
        """Take one reading: offset is Redis's time minus this host's, in seconds."""
        if not self.off and abs(offset) > OFF:
            self.off = True
            self._logger.warning("this host's clock is %.1f s %s Redis's: ticks follow Redis's clock",
                                 abs(offset), "ahead of" if offset < 0 else "behind")
        elif self.off and abs(offset) < BACK:
            self.off = False
            self._logger.info("this host's clock is back within %s s of Redis's", BACK)
