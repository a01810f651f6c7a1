#!/usr/bin/env python3
"""Where a compiled CPU step's kernels spend their time, by kernel and by
code address: perf's cpu-clock samples (no hardware counters needed) mapped
onto the kernels' own symbols.

  scripts/kernel_perf.py [--steps N] [--top K] [--kernel NAME ...] -- CMD...

CMD runs twice under a scratch NOVA_CACHE_DIR: once to fill the cache, once
under `perf record`. Kernels load from a memfd (`memfd:nova-kernels.so
(deleted)`), which perf cannot symbolize, so the shared object is carved out
of the cache entry (the bytes of `<key>.nexe` from the first ELF magic) and
perf's addresses are mapped onto its `nm -n` symbols. Prints each kernel's
share of all samples; for each --kernel, its hottest 128-byte ranges with
the instructions they hold (objdump), to tell a microkernel from a packing
loop or an epilogue; with --loops, its samples by innermost loop instead
(each backward branch's range [target, branch] of the disassembled kernel,
a sample counted in the smallest one holding it), with each loop's length
and instruction mix: where a kernel of many loops (attention) spends its time;
with --annotate LO:HI, each instruction of that range with its samples
(perf's cpu-clock samples skid: a stalled instruction's samples land on the
ones after it, so a load that waits on memory shows as a hot instruction
right after the load).

  scripts/kernel_perf.py --kernel nova_k46 -- build/bench/gpt_step small 10
  scripts/kernel_perf.py --loops --kernel nova_k64 -- build/bench/gpt_step small 10
  scripts/kernel_perf.py --annotate 0xd6b0:0xd959 --kernel nova_k46 -- build/bench/gpt_step small 10
"""
import argparse
import bisect
import collections
import glob
import os
import subprocess
import sys
import tempfile


def symbols(so):
    out = subprocess.run(["nm", "-n", so], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt":
            syms.append((int(parts[0], 16), parts[2]))
    return syms


def disassemble(so, lo, hi):
    """[(address, mnemonic, operands)] of so's code in [lo, hi)."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
                          f"--stop-address={hi:#x}", so], capture_output=True, text=True).stdout
    out = []
    for line in dis.splitlines():
        head, _, rest = line.partition("\t")
        if not rest or not head.strip().endswith(":"):
            continue
        try:
            addr = int(head.strip()[:-1], 16)
        except ValueError:
            continue
        mnemonic, _, operands = rest.strip().partition(" ")
        out.append((addr, mnemonic, operands.strip()))
    return out


def print_loops(so, lo, hi, shares):
    """The kernel in [lo, hi)'s samples (address -> share) by innermost loop."""
    code = disassemble(so, lo, hi)
    loops = []
    for addr, mnemonic, operands in code:
        if mnemonic.startswith("j"):
            try:
                target = int(operands.split()[0], 16)
            except ValueError:
                continue
            if lo <= target <= addr:
                loops.append((target, addr))
    per_loop, outside = collections.Counter(), 0.0
    for addr, share in shares.items():
        holding = [(b - a, a, b) for a, b in loops if a <= addr <= b]
        if holding:
            per_loop[min(holding)[1:]] += share
        else:
            outside += share
    print(f"  by innermost loop (share of all samples; instructions; mix); {outside:.2f}% outside loops")
    for (a, b), n in per_loop.most_common(12):
        body = [c for c in code if a <= c[0] <= b]
        mix = collections.Counter(m for _, m, _ in body)
        print(f"  {a:#8x}-{b:#x} {n:6.2f}%  {len(body):4d}  " + ", ".join(f"{k} {v}" for k, v in mix.most_common(6)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=20, help="kernels listed (default 20)")
    ap.add_argument("--kernel", action="append", default=[], help="a kernel whose hot ranges to show")
    ap.add_argument("--freq", type=int, default=4000, help="samples a second (default 4000)")
    ap.add_argument("--loops", action="store_true", help="each --kernel's samples by innermost loop")
    ap.add_argument("--annotate", metavar="LO:HI", help="instead: each instruction in this address range (hex, as --loops "
                    "prints them) of each --kernel, with its share of all samples")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command (after --)")
    with tempfile.TemporaryDirectory(prefix="nova-kernel-perf-") as tmp:
        env = dict(os.environ, NOVA_CACHE_DIR=os.path.join(tmp, "cache"))
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        entries = glob.glob(os.path.join(tmp, "cache", "*.nexe"))
        if len(entries) != 1:
            sys.exit(f"kernel_perf: expected one cache entry, found {len(entries)}: run one step function")
        blob = open(entries[0], "rb").read()
        start = blob.find(b"\x7fELF")
        if start < 0:
            sys.exit("kernel_perf: no ELF object in the cache entry (a GPU step?)")
        so = os.path.join(tmp, "kernels.so")
        open(so, "wb").write(blob[start:])
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.freq), "-o", data, "--"] + cmd,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        # perf report gives each unsymbolized address of the memfd object
        # relative to that object (its file offset), with its share of all
        # samples; perf script would give run-time addresses.
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio",
                                 "--percent-limit", "0"], capture_output=True, text=True, check=True).stdout
        syms = symbols(so)
        starts = [s[0] for s in syms]
        per_kernel, per_range = collections.Counter(), collections.defaultdict(collections.Counter)
        per_addr = collections.defaultdict(collections.Counter)
        for line in report.splitlines():
            if "nova-kernels.so" not in line or "[.]" not in line:
                continue
            share = float(line.split()[0].rstrip("%"))
            addr = int(line.split()[-1], 16)
            i = bisect.bisect_right(starts, addr) - 1
            if i < 0:
                continue
            name = syms[i][1]
            per_kernel[name] += share
            per_range[name][addr // 128 * 128] += share
            per_addr[name][addr] += share
        if not per_kernel:
            sys.exit("kernel_perf: no samples in the kernels' object")
        print(f"{sum(per_kernel.values()):.1f}% of the samples in kernels")
        for name, n in per_kernel.most_common(args.top):
            print(f"  {name:12s} {n:6.2f}%")
        for name in args.kernel:
            ranges = per_range.get(name)
            if not ranges:
                print(f"{name}: no samples")
                continue
            if args.annotate:
                lo, hi = (int(x, 16) for x in args.annotate.split(":"))
                print(f"{name}: {lo:#x}-{hi:#x}, share of all samples by instruction")
                dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
                                      f"--stop-address={hi + 1:#x}", so], capture_output=True, text=True).stdout
                for l in dis.splitlines():
                    head = l.split("\t")[0]
                    if l.count("\t") >= 1 and ":" in head:
                        addr = int(head.strip().rstrip(":"), 16)
                        print(f"  {per_addr[name].get(addr, 0.0):6.2f}%  {l.strip()}")
                continue
            if args.loops:
                i = [s[1] for s in syms].index(name)
                print(f"{name}: {sum(ranges.values()):.2f}% of all samples")
                print_loops(so, syms[i][0], syms[i + 1][0] if i + 1 < len(syms) else syms[i][0] + (1 << 20),
                            per_addr[name])
                continue
            print(f"{name}: hottest ranges (share of all samples; instruction counts)")
            for lo, n in sorted(ranges.items(), key=lambda kv: -kv[1])[:8]:
                dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
                                      f"--stop-address={lo + 128:#x}", so], capture_output=True, text=True).stdout
                ops = collections.Counter(l.split("\t")[1].split()[0] for l in dis.splitlines()
                                          if l.count("\t") >= 1 and ":" in l.split("\t")[0])
                mix = ", ".join(f"{k} {v}" for k, v in ops.most_common(5))
                print(f"  {lo:#8x} {n:6.2f}%  {mix}")


if __name__ == "__main__":
    main()
