"""``dsh-todo acp``: the agent loop as an Agent Client Protocol agent, so an editor shows the plan.

:mod:`.updates` (no SDK) maps session-log events to ACP ``session/update`` payloads: DSH's retired ACP mapping
(SPEC §10), revived. :mod:`.agent` (imports the ``acp`` SDK, so import it only to serve) is the agent itself. The
package re-exports neither, so importing it never imports the SDK.
"""

__all__: list[str] = []
