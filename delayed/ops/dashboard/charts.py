"""The dashboard's charts: a rate over the sampler's window as SVG geometry with labelled axes (time
ago, tasks/s), drawn by the template (no script: the CSP allows none)."""
from typing import Dict, List, Optional, Sequence, Tuple

Point = Tuple[float, Optional[float]]
"""A sample's unix time and its value (None: no value then, which breaks the line)."""

WIDTH, HEIGHT = 200, 80
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 8, 18
"""The SVG's size and the margins the axes' labels take."""


def chart(points: Sequence[Point], end: float, window: float) -> Dict[str, object]:
    """points over the window seconds before end, scaled into the plot area: its polylines (one per
    run without a gap), y ticks (the lowest, 0 and the highest value, tasks/s), x ticks (window ago,
    half of it, now), the latest value and the plot's box."""
    start = end - window
    shown = [(at, value) for at, value in points if start <= at <= end]
    known = [value for _, value in shown if value is not None]
    low, high = min(known + [0.0]), max(known + [0.0])
    if high == low:
        high = low + 1.0
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(at: float) -> float:
        return LEFT + (at - start) / window * plot_width

    def y(value: float) -> float:
        return TOP + (high - value) / (high - low) * plot_height

    lines: List[str] = []
    run: List[str] = []
    for at, value in shown:
        if value is None:
            if run:
                lines.append(" ".join(run))
            run = []
            continue
        run.append(f"{x(at):.1f},{y(value):.1f}")
    if run:
        lines.append(" ".join(run))
    y_ticks = [(round(y(value), 1), f"{value:.3g}") for value in sorted({low, 0.0, high})]
    x_ticks = [(round(x(start + window * part), 1), _ago(window * (1 - part))) for part in (0.0, 0.5, 1.0)]
    return {"lines": lines, "y_ticks": y_ticks, "x_ticks": x_ticks, "latest": known[-1] if known else None,
            "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
            "bottom": HEIGHT - BOTTOM, "zero": round(y(0.0), 1)}


def _ago(seconds: float) -> str:
    """A time axis label: "now", "-30 s", "-5 min"."""
    if seconds <= 0:
        return "now"
    return f"-{seconds / 60:g} min" if seconds >= 120 else f"-{seconds:g} s"
