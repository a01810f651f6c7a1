#!/usr/bin/env python3
"""Two builds of the compiler against each other on one benchmark, run by
run in alternation, so that this VM's drift (up to 1.5x over minutes)
falls on both alike: each kernel's ms a launch from NOVA_PROFILE, as a
mean over the rounds, with the new build's over the old's, and the
benchmark's own RESULT figures.

  scripts/ab_compilers.py save DIR                 (copy build/'s compiler into DIR)
  scripts/ab_compilers.py [--rounds N] [--kernel NAME ...] [--against NAME]
                          OLD_DIR NEW_DIR -- CMD...

`save` keeps build/src/compiler/libnova.so and nova-compile; a run loads
each DIR's pair through LD_LIBRARY_PATH and NOVA_COMPILE_TOOL with
NOVA_CACHE=off (every run compiles), and NOVA_PROFILE=60 unless the
environment sets it. --kernel names the kernels to report (default: the 8
costliest of the first run); --against divides each kernel's time by that
kernel's in the same run first (a kernel the change leaves alone: the
VM's drift within a round cancels too). Kernel numbers are the outliner's,
the same in both builds only where the change keeps the step's kernels:
check the `what` column printed beside them.

  scripts/ab_compilers.py save /tmp/old     (at the old commit; then rebuild)
  scripts/ab_compilers.py save /tmp/new
  NOVA_MATMUL_PRECISION=bf16 scripts/ab_compilers.py --rounds 6 \\
      --kernel nova_k64 --against nova_k3 /tmp/old /tmp/new -- build/bench/gpt_step small 20
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["src/compiler/libnova.so", "src/compiler/nova-compile"]
ROW = re.compile(r"^\s+(nova_k\w+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)\s+\S+\s+\S+\s+(.*)$")
RESULT = re.compile(r"(\w+)=([\d.]+)")


def save(directory):
    os.makedirs(directory, exist_ok=True)
    for f in FILES:
        shutil.copy2(os.path.join(ROOT, "build", f), directory)
    print(f"saved {', '.join(os.path.basename(f) for f in FILES)} into {directory}")


def run(directory, cmd):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = directory + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["NOVA_COMPILE_TOOL"] = os.path.join(directory, "nova-compile")
    env["NOVA_CACHE"] = "off"
    env.setdefault("NOVA_PROFILE", "60")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} with {directory} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    kernels, results = {}, {}
    for line in (out.stdout + out.stderr).splitlines():
        m = ROW.match(line)
        if m:
            kernels[m.group(1)] = (float(m.group(4)), m.group(5), float(m.group(2)))
        elif line.startswith("RESULT"):
            results.update({k: float(v) for k, v in RESULT.findall(line)})
    if not kernels:
        sys.exit(f"no kernel profile in the output of {' '.join(cmd)} (NOVA_PROFILE={env['NOVA_PROFILE']})")
    return kernels, results


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "save":
        return save(sys.argv[2])
    if "--" not in sys.argv:
        sys.exit(__doc__)
    at = sys.argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--kernel", action="append", default=[])
    p.add_argument("--against")
    p.add_argument("old")
    p.add_argument("new")
    args = p.parse_args(sys.argv[1:at])
    cmd = sys.argv[at + 1:]
    builds = {"old": args.old, "new": args.new}
    times = {b: {} for b in builds}
    results = {b: {} for b in builds}
    what = {}
    for r in range(args.rounds):
        for b, directory in builds.items():
            kernels, res = run(directory, cmd)
            if not args.kernel:
                args.kernel = sorted(kernels, key=lambda k: -kernels[k][2])[:8]
            base = kernels[args.against][0] if args.against else 1.0
            # A kernel one build lacks (the change removed or renumbered
            # it) is reported for the other only: the RESULT figures still
            # compare the two.
            for k in args.kernel:
                if k in kernels:
                    times[b].setdefault(k, []).append(kernels[k][0] / base)
                    what.setdefault((b, k), kernels[k][1])
            for name, v in res.items():
                results[b].setdefault(name, []).append(v)
            shown = " ".join(f"{k}={times[b][k][-1]:.3f}" if k in kernels else f"{k}=-" for k in args.kernel)
            print(f"round {r + 1} {b}: {shown}", flush=True)
    unit = f"x {args.against}'s time" if args.against else "ms a launch"
    print(f"\nmeans over {args.rounds} rounds ({unit}), new / old:")
    for k in args.kernel:
        if k not in times["old"] or k not in times["new"]:
            b = "old" if k in times["old"] else "new"
            print(f"  {k:10s} only in the {b} build: {statistics.mean(times[b][k]):8.3f}   {what[(b, k)]}")
            continue
        old, new = statistics.mean(times["old"][k]), statistics.mean(times["new"][k])
        print(f"  {k:10s} old {old:8.3f}  new {new:8.3f}  {new / old:6.3f}x   {what[('new', k)]}")
        if what[("old", k)] != what[("new", k)]:
            print(f"  {'':10s} (old: {what[('old', k)]})")
    for name in sorted(results["new"]):
        if name in results["old"]:
            old, new = statistics.mean(results["old"][name]), statistics.mean(results["new"][name])
            print(f"  {name:22s} old {old:10.1f}  new {new:10.1f}  {new / old:6.3f}x")


if __name__ == "__main__":
    main()
