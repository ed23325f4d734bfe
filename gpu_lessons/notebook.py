"""One call that prepares a lesson notebook."""

from __future__ import annotations

import os


def setup(*, report: bool = True):
    """Load bokeh's JavaScript inline (so plots render offline) and return the env report.

    Bokeh fetches its JavaScript from cdn.bokeh.org by default; behind a firewall, on a
    plane or in CI the plots then silently fail to draw.  Inline resources travel inside the
    notebook instead.
    """
    os.environ.setdefault("BOKEH_RESOURCES", "inline")
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(resources=INLINE, hide_banner=True)
    if report:
        from .env import report as _report

        return _report()
    return None
