"""How ``--help`` is laid out, and what a mistyped command is answered: the manual fits the terminal it is read in.

argparse's own formatters either keep every line as written (so a 115-column sentence is cut by an 80-column
terminal mid-word) or re-wrap everything (so the examples lose their layout), and both break words at hyphens: the
default root came out as ``./.dsh-`` / ``todo/sessions``. :class:`Manual` re-wraps prose to the terminal, keeps
indented lines (examples, a script's JSON) as written, and breaks only at spaces.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    import textwrap  # only when help is shown (argparse imports it as late)

    return textwrap.wrap(" ".join(text.split()), max(width, 20), initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False)


class Manual(argparse.HelpFormatter):
    """Prose wrapped to the terminal at spaces only; a line that starts with a space is an example, kept as is.

    Paragraphs are separated by blank lines or by example lines, so a description's sentences flow together and a
    run of examples keeps its columns.
    """

    def _split_lines(self, text: str, width: int) -> list[str]:
        return _wrap(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        prose: list[str] = []

        def flush() -> None:
            if prose:
                out.extend(_wrap(" ".join(prose), width, indent))
                prose.clear()

        for line in text.splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line[0].isspace():
                flush()
                out.append(indent + line)
            else:
                prose.append(line)
        flush()
        return "\n".join(out)


def nearest(word: str, names: Iterable[str]) -> str | None:
    """The command ``word`` most likely meant, when one is close enough to suggest."""
    import difflib

    found = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return found[0] if found else None
