"""Prints the PTX of the first gpu.binary in an MLIR file (or stdin).

MLIR writes the PTX as the `assembly` string of a #gpu.object, with bytes
escaped as \\XX; the serializer's string ends with a NUL, which ptxas refuses.
"""
import re
import sys

text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
match = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', text)
if not match:
    sys.exit("extract_ptx.py: no gpu.binary with PTX assembly in the input")
ptx = re.sub(r'\\([0-9A-Fa-f]{2})|\\(.)',
             lambda m: chr(int(m.group(1), 16)) if m.group(1) else m.group(2), match.group(1))
sys.stdout.write(ptx.rstrip("\0"))
