"""psycopg is an optional extra: nothing outside the postgres plugin imports it."""

from __future__ import annotations

import subprocess
import sys


def test_importing_dsh_todo_and_its_front_doors_does_not_import_psycopg() -> None:
    code = ("import sys, dsh_todo, dsh_todo.cli, dsh_todo.runtime, dsh_todo.standard, dsh_todo.harness.persistence, "
            "dsh_todo.harness.persistence.jsonl.plugin, dsh_todo.carriers.web.mux; dsh_todo.cli.build_parser(); "
            "dsh_todo.standard.composition(None, database='postgresql://nowhere/db'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_binary')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
