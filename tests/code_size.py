"""How the size aims of the adapters are counted (issue 12: the minimal
adapter at most 80 lines, the Agents SDK one 120, DBOS 180, 185 since issue
32; issue 18: Temporal 150, 210 since issue 33, 215 since issue 32): lines
holding code, with blank lines, comments and docstrings left out. One
measure for every size test, so the aims compare.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

_DEFINITIONS = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def lines_of_code(source: str) -> int:
    """Lines of ``source`` holding code (a docstring is not code)."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, _DEFINITIONS) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _NOT_CODE and tok.type != tokenize.ENDMARKER:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - docstrings)


def package_lines_of_code(package: Path) -> int:
    """:func:`lines_of_code` summed over a package's modules."""
    return sum(lines_of_code(p.read_text()) for p in sorted(package.glob("*.py")))
