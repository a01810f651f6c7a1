#!/usr/bin/env python3
"""Writes build/reliability.json: the numbers behind the test suite's claims.

Usage: reliability.py BUILD_DIR ASAN_BUILD_DIR [TSAN_BUILD_DIR [LIBFUZZER_DIR]]
Reads the fuzzers' summaries (BUILD_DIR/fuzz-graphs.json,
fuzz-reader-*.json), the ops whose VJPs the unit tests checked against
finite differences (grad-checked-ops.json) against the dialect's
differentiable ops (src/compiler/dialect/NovaOps.td), and each build's
ctest results (ctest.xml, from ctest --output-junit): how many tests ran
and passed, normally and under ASan + UBSan, and whether the canaries were
caught, and the libFuzzer runs' summaries (LIBFUZZER_DIR/libfuzzer-*.json,
from tests/fuzz/libfuzzer.sh). Every figure is measured by this run; nothing is copied in.
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
import xml.etree.ElementTree as ET


def ctest_results(build):
    path = pathlib.Path(build) / "ctest.xml"
    if not path.exists():
        return None
    cases = ET.parse(path).getroot().iter("testcase")
    results = {c.get("name"): c.get("status") for c in cases}
    passed = [n for n, status in results.items() if status == "run"]
    return {"tests": len(results), "passed": len(passed), "failed": len(results) - len(passed),
            "names": passed}


def differentiable_ops():
    """The mnemonics of the ops that implement NovaDifferentiableOpInterface:
    those of the unary, binary and reduction classes (which declare it), and
    every other def whose trait list names it."""
    td = (ROOT / "src/compiler/dialect/NovaOps.td").read_text()
    ops = set()
    for m in re.finditer(r'^def Nova_\w+\s*:\s*(\w+)<"(\w+)"(.*?)(?:\{|;)\s*$', td, re.M | re.S):
        base, name, rest = m.groups()
        if base in ("Nova_UnaryOp", "Nova_BinaryOp", "Nova_ReduceOp") or \
                "NovaDifferentiableOpInterface" in rest:
            ops.add(name)
    return ops


def grad_checked(build):
    path = pathlib.Path(build) / "grad-checked-ops.json"
    if not path.exists():
        return None
    checked = set(json.loads(path.read_text())["ops"])
    dialect = differentiable_ops()
    return {"differentiable_ops": len(dialect), "checked": len(dialect & checked),
            "unchecked": sorted(dialect - checked)}


def main():
    build, asan = sys.argv[1], sys.argv[2]
    report = {}
    fuzz = pathlib.Path(build) / "fuzz-graphs.json"
    report["fuzz_graphs"] = json.loads(fuzz.read_text()) if fuzz.exists() else None
    readers = sorted(pathlib.Path(build).glob("fuzz-reader-*.json"))
    report["fuzz_readers"] = [json.loads(p.read_text()) for p in readers]
    report["grad_checked_ops"] = grad_checked(build)
    normal = ctest_results(build)
    sanitized = ctest_results(asan)
    if normal:
        report["tests"] = {k: normal[k] for k in ("tests", "passed", "failed")}
    if sanitized:
        canaries = [n for n in sanitized["names"] if n.startswith("sanitizers:")]
        report["sanitizers"] = {
            "build": "GCC ASan + UBSan, -fno-sanitize-recover=all",
            "tests": sanitized["tests"], "passed": sanitized["passed"], "failed": sanitized["failed"],
            "canaries": canaries,
        }
    if len(sys.argv) > 3:
        tsan = ctest_results(sys.argv[3])
        if tsan:
            report["thread_sanitizer"] = {"build": "GCC TSan, the runtime's tests", "tests": tsan["tests"],
                                          "passed": tsan["passed"], "failed": tsan["failed"]}
    if len(sys.argv) > 4:
        runs = sorted(pathlib.Path(sys.argv[4]).glob("libfuzzer-*.json"))
        report["libfuzzer_readers"] = [json.loads(p.read_text()) for p in runs]
    out = pathlib.Path(build) / "reliability.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"reliability: {out}")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
