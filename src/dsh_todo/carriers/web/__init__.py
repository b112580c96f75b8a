"""The web page: the plan strip and tool rows of a session, live over Server-Sent Events (SPEC §6.3, §9).

``serve_in_background(ctx)`` serves a booted context on a thread and returns ``(url, stop)``; ``dsh-todo web`` serves
the sessions under a persistence root. The client is plain files under ``static/`` (no build step); model-written
text reaches it only as text.
"""

from dsh_todo.carriers.web.app import WebApp
from dsh_todo.carriers.web.server import BackgroundServer, run_web, serve_in_background

__all__ = ["BackgroundServer", "WebApp", "run_web", "serve_in_background"]
