#!/usr/bin/env python3
"""Writes build/reliability.json: the numbers behind the test suite's claims.

Usage: reliability.py BUILD_DIR ASAN_BUILD_DIR [TSAN_BUILD_DIR]
Reads the fuzzers' summaries (BUILD_DIR/fuzz-graphs.json,
fuzz-reader-*.json) and each build's
ctest results (ctest.xml, from ctest --output-junit): how many tests ran
and passed, normally and under ASan + UBSan, and whether the canaries were
caught. Every figure is measured by this run; nothing is copied in.
"""
import json
import pathlib
import sys
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


def main():
    build, asan = sys.argv[1], sys.argv[2]
    report = {}
    fuzz = pathlib.Path(build) / "fuzz-graphs.json"
    report["fuzz_graphs"] = json.loads(fuzz.read_text()) if fuzz.exists() else None
    readers = sorted(pathlib.Path(build).glob("fuzz-reader-*.json"))
    report["fuzz_readers"] = [json.loads(p.read_text()) for p in readers]
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
    out = pathlib.Path(build) / "reliability.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"reliability: {out}")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
