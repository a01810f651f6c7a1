# Prints a function of N independent parameter updates (p - 0.5 g, each a
# kernel of 3 buffers once lowered), for gpu-threads-side-by-side-parameters.test;
# with --kernel, a configured gpu_threads kernel of N buffer arguments, for
# gpu-outline-parameters.test.
import sys

if sys.argv[1] == "--kernel":
    n = int(sys.argv[2])
    args = ", ".join(f"%a{i}: memref<4xf32>" for i in range(n))
    print(f"func.func @wide(%wg: index, {args}) attributes {{nova.gpu_block_threads = 32 : i64, "
          "nova.lowering_config = #nova.lowering_config<gpu_threads, workgroups = 1, tile = [32], "
          "register_tile = []>} {")
    print("  return")
    print("}")
    sys.exit(0)
n = int(sys.argv[1])
t = "tensor<64xf32>"
args = ", ".join(f"%p{i}: {t}, %g{i}: {t}" for i in range(n))
print(f"func.func @updates({args}) -> ({', '.join([t] * n)}) {{")
print("  %s = nova.constant 0.5 : tensor<f32>")
print(f"  %b = nova.broadcast %s : tensor<f32> -> {t}")
for i in range(n):
    print(f"  %d{i} = nova.mul %g{i}, %b : {t}, {t}")
    print(f"  %n{i} = nova.sub %p{i}, %d{i} : {t}, {t}")
print(f"  return {', '.join(f'%n{i}' for i in range(n))} : {', '.join([t] * n)}")
print("}")
