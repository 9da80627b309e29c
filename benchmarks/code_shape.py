"""The shape of the code, as issue 51 measures it: functions that return ``dict[str, Any]`` (all,
and those that are not a typed result's ``to_json`` - a JSON object is what a serializer
returns, not a result passed around by string keys),
string-key reads (``x["key"]`` and ``x.get("key")``), the largest modules, and the import graph
(modules, edges, upward imports, circles) read by the layering test's own readers.

    python benchmarks/code_shape.py [ROOT ...]     # default: this repository

Give two roots (an old checkout and this one) to put them side by side. Reads files only.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent.parent


def _layering():
    """tests/project/test_layering.py, whose readers define what an import, a wing and a
    circle are (one definition, the one the tests hold the code to)."""
    spec = importlib.util.spec_from_file_location("test_layering", HERE / "tests" / "project" / "test_layering.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(HERE / "tests"))  # the test module imports tests/repository.py
    spec.loader.exec_module(module)
    return module


def _wing(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "validation" and len(parts) > 2 else parts[0]


def shape(root: pathlib.Path) -> dict:
    layering = _layering()
    per_file = {}
    for folder in layering.FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            source = path.read_text()
            returns = reads = serializers = 0
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
                    is_dict = "dict[str, Any]" in ast.unparse(node.returns)
                    returns += is_dict
                    serializers += is_dict and node.name == "to_json"
                if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                        and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
                    reads += 1
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                        and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)):
                    reads += 1
            per_file[str(path.relative_to(root))] = (returns, reads, source.count("\n"), serializers)
    by_wing_returns, by_wing_reads = collections.Counter(), collections.Counter()
    for name, (returns, reads, *_) in per_file.items():
        by_wing_returns[_wing(name)] += returns
        by_wing_reads[_wing(name)] += reads
    known = layering.modules_of(root)
    return {
        "root": str(root),
        "dict_returns": sum(v[0] for v in per_file.values()),
        "dict_returns_not_to_json": sum(v[0] - v[3] for v in per_file.values()),
        "string_key_reads": sum(v[1] for v in per_file.values()),
        "dict_returns_by_wing": dict(by_wing_returns.most_common()),
        "string_key_reads_by_wing": dict(by_wing_reads.most_common()),
        "largest_modules": sorted(((n, v[2]) for n, v in per_file.items()), key=lambda t: -t[1])[:5],
        "modules": len(known),
        "import_edges": sum(len(layering.imports_of(m, p, known)) for m, p in known.items()),
        "upward_imports": len(layering.upward_imports(root)),
        "import_circles": len(layering.import_circles(root)),
        "validation_wings": dict(collections.Counter(layering.wing_of(m) for m in known
                                                     if m.startswith("zoo.validation."))),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", default=[str(HERE)])
    args = parser.parse_args(argv)
    for root in args.roots:
        print(json.dumps(shape(pathlib.Path(root).resolve()), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
