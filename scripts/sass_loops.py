#!/usr/bin/env python3
"""sass_loops.py - the instruction mix of each loop in a cubin's SASS.

    scripts/sass_loops.py KERNEL.cubin [...]        (or .ptx: ptxas -O3 first)

For every function, every loop (a branch back to an earlier address; the
loop is the code from that address to the branch) with its instructions
by class: the tensor-core MMAs (HMMA, HGMMA), shared loads to registers
(LDSM ldmatrix, LDS), global-to-shared copies (LDGSTS cp.async, UTMALDG
TMA), global loads and stores, local ones (STL, LDL: spills), barriers and
mbarrier waits, and the rest
(integer and address arithmetic, moves, predicates), with the other
instructions per MMA. A static count, not a timing and not an order: two
loops of the same counts may place them differently (cuobjdump -sass
shows the order), and neither says how long they take.

Needs cuobjdump, which the CUDA toolkit here (/usr/local/cuda) lacks:
NVIDIA's wheel has it (`pip download --no-deps nvidia-cuda-cuobjdump`,
unzip, then NOVA_CUOBJDUMP=<dir>/nvidia/cu13/bin/cuobjdump or put it on
PATH). A development aid only: no build or test uses it.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
FUNCTION = re.compile(r"Function : (\S+)")
BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")
CLASSES = [
    ("mma", ("HMMA", "HGMMA", "IMMA", "DMMA")),
    ("ldsm", ("LDSM",)),
    ("lds", ("LDS",)),
    ("cp.async", ("LDGSTS", "UTMALDG", "UBLKCP")),
    ("global ld/st", ("LDG", "STG", "ST.E", "LD.E")),
    ("shared st", ("STS", "STSM")),
    ("local (spills)", ("STL", "LDL")),
    ("barrier/wait", ("BAR", "SYNCS", "DEPBAR", "LDGDEPBAR", "WARPGROUP", "WARPSYNC")),
    ("branch", ("BRA", "BSYNC", "BSSY")),
]


def classify(opcode):
    head = opcode.split(".")[0]
    for name, prefixes in CLASSES:
        if head in prefixes:
            return name
    return "other"


def sass_of(path):
    tool = os.environ.get("NOVA_CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        sys.exit("sass_loops.py: no cuobjdump (NOVA_CUOBJDUMP=<path>; see this script's header)")
    cubin = path
    if path.endswith(".ptx"):
        arch = os.environ.get("NOVA_SASS_ARCH", "sm_90a")
        cubin = tempfile.mktemp(suffix=".cubin")
        ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
        subprocess.run([ptxas, "-O3", "-arch=" + arch, path, "-o", cubin], check=True)
    return subprocess.run([tool, "-sass", cubin], check=True, capture_output=True, text=True).stdout


def functions(sass):
    """(name, [(address, opcode, text)]) for each function."""
    name, body = None, []
    for line in sass.splitlines():
        m = FUNCTION.search(line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = LINE.search(line)
        if m and name and (m.group(2) or "").strip() != "@!PT":  # @!PT: never runs (ptxas's padding)
            body.append((int(m.group(1), 16), m.group(3), m.group(4)))
    if name:
        yield name, body


def loops(body):
    """(first, last) indices of each backward branch's loop, innermost first."""
    index = {address: i for i, (address, _, _) in enumerate(body)}
    found = []
    for i, (address, opcode, operands) in enumerate(body):
        if not opcode.startswith("BRA"):
            continue
        m = BRANCH_TARGET.search(operands)
        if m and int(m.group(1), 16) < address and int(m.group(1), 16) in index:
            found.append((index[int(m.group(1), 16)], i))
    return sorted(found, key=lambda r: r[1] - r[0])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        for name, body in functions(sass_of(path)):
            print(f"{name}: {len(body)} instructions")
            for first, last in loops(body):
                counts = {}
                for _, opcode, _ in body[first:last + 1]:
                    c = classify(opcode)
                    counts[c] = counts.get(c, 0) + 1
                total = last - first + 1
                mma = counts.get("mma", 0)
                mix = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
                per = f", {(total - mma) / mma:.2f} others a MMA" if mma else ""
                print(f"  loop {body[first][0]:#x}-{body[last][0]:#x}: {total} instructions ({mix}){per}")


if __name__ == "__main__":
    main()
