#!/usr/bin/env python3
"""bench/device/matmul_check.py's supervisor, without a GPU: children that
hang, die, or end between cases cost exactly the case they were on, and the
rest of the table still comes.

Usage: device_check_supervisor.py BENCH_DEVICE_DIR   (as a test)
       device_check_supervisor.py --child FIRST      (the fake child)
"""
import os
import sys
import time

CASES = 6


def child(first):
    # Case 1 hangs, case 3 raises (as a kernel that faults), case 4 reports
    # its row and then dies before the next START (as an unload that fails).
    for i in range(first, CASES):
        print(f"START\t{i}", flush=True)
        if i == 1:
            time.sleep(60)
        if i == 3:
            raise RuntimeError("cuLaunchKernel failed: CUDA error 700")
        print(f"ROW\t{i}\tk{i}\t1e-7\t1e-6\tyes" + "\t-" * 6, flush=True)
        if i == 4 and first < 4:
            sys.exit(3)
    return 0


def main():
    if sys.argv[1] == "--child":
        return child(int(sys.argv[2]))
    sys.dont_write_bytecode = True  # nothing written into the source tree
    sys.path.insert(0, sys.argv[1])
    import matmul_check
    rows = {}

    def report(i, row):
        assert i not in rows, f"case {i} reported twice"
        rows[i] = row

    started = time.monotonic()
    matmul_check.supervise([f"k{i}" for i in range(CASES)], report,
                           lambda first: [sys.executable, os.path.abspath(__file__), "--child", str(first)],
                           case_timeout=1.0, start_timeout=10.0)
    for i in sorted(rows):
        print(i, rows[i])
    want = {0: "yes", 1: "HUNG (> 1 s)", 2: "yes", 3: "FAILED: RuntimeError: cuLaunchKernel failed: CUDA error 700",
            4: "yes", 5: "yes"}
    got = {i: (r[3] if isinstance(r, tuple) else r) for i, r in rows.items()}
    assert got == want, f"got {got}, want {want}"
    assert time.monotonic() - started < 30, "the hang was not cut at its timeout"
    print("supervisor: every case reported once, the hang and the fault cost one case each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
