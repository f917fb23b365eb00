"""Play speeds shared by the walkthroughs' controls (pages/step_controls.js plays in the browser).

At one step a second a 1,500-operator model takes 25 minutes; faster speeds advance as many
steps as the elapsed time asks for at each tick, so the rate holds when a tick is late.
"""

from __future__ import annotations

SPEEDS = {"1/s": 1, "2/s": 2, "4/s": 4, "20/s": 20, "100/s": 100, "500/s": 500}  # steps per second
DEFAULT = "2/s"
