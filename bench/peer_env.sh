# peer_env.sh - sourced by the *_peer.sh scripts: puts each Python peer at its
# best and says how to run it.
#
#   torch2    PyTorch 2.x from PyPI (MKL) in a virtual environment made here
#             ($NOVA_BENCH_VENV, default ~/.cache/nova-bench/torch2;
#             pip install torch==$NOVA_BENCH_TORCH numpy), tcmalloc
#             preloaded, and on AMD CPUs MKL's vendor check answered "Intel"
#             (below)
#   debian    Debian's /usr/bin/python3 (python3-torch 1.13, python3-numpy) on
#             OpenBLAS-on-OpenMP (libopenblas0-openmp first on
#             LD_LIBRARY_PATH), tcmalloc preloaded, OPENBLAS_CORETYPE = the
#             best kernel set this CPU has (OpenBLAS 0.3.21 takes newer CPUs
#             for "Prescott"), ATen's kernels at AVX-512 where the CPU has it
# Missing Debian packages are installed when possible (root or sudo).
# After sourcing: run_torch2 ARGS..., run_debian ARGS... run python with them.
venv=${NOVA_BENCH_VENV:-$HOME/.cache/nova-bench/torch2}
torch_version=${NOVA_BENCH_TORCH:-2.5.1}

peer_setup() { # [torch2] [debian]: make what the named peers need
  local need_debs=() p
  if [[ " $* " == *" torch2 "* ]]; then
    dpkg-query -W -f='${Status}' libgoogle-perftools4 2>/dev/null | grep -q "install ok installed" ||
      need_debs+=(libgoogle-perftools4)
  fi
  if [[ " $* " == *" debian "* ]]; then
    for p in python3-torch python3-numpy libopenblas0-openmp libgoogle-perftools4; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_debs+=("$p")
    done
  fi
  if [[ " $* " == *" torch2 "* ]] && [ ! -x "$venv/bin/python" ]; then
    dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed" || need_debs+=(python3-venv)
  fi
  if [ ${#need_debs[@]} -gt 0 ]; then
    local sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    echo "== installing ${need_debs[*]}"
    $sudo_cmd apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${need_debs[@]}" >/dev/null
  fi
  if [[ " $* " == *" torch2 "* ]] && [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv (torch==$torch_version from PyPI)"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q "torch==$torch_version" numpy
  fi
}

coretype=
if grep -qw avx512_bf16 /proc/cpuinfo; then coretype=Cooperlake
elif grep -qw avx512f /proc/cpuinfo; then coretype=SkylakeX
elif grep -qw avx2 /proc/cpuinfo; then coretype=Haswell
fi

# MKL picks its kernels by CPU vendor: on AMD it runs generic code paths
# (PyPI's MKL 2024.0 on a 2-core Zen 4 here: 106-122 GFLOP/s at 2048 x 1024
# x 256 where it ran 155-205 told the CPU is Intel's, 3 runs each, and the
# small GPT step 5151-5723 tokens/s where it ran 5951-6623). Its internal
# mkl_serv_intel_cpu_true is answered by a preloaded one-line library, built
# here; peer_info.py says when it is loaded.
mkl_vendor_shim=
if grep -q AuthenticAMD /proc/cpuinfo; then
  mkl_vendor_shim=$(dirname "$venv")/mkl-intel-cpu.so
  if [ ! -f "$mkl_vendor_shim" ]; then
    mkdir -p "$(dirname "$venv")"
    echo 'int mkl_serv_intel_cpu_true(void) { return 1; }' |
      cc -shared -fPIC -O2 -x c - -o "$mkl_vendor_shim" || mkl_vendor_shim=
  fi
fi
run_torch2() {
  LD_PRELOAD="/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4${mkl_vendor_shim:+ $mkl_vendor_shim}" \
    "$venv/bin/python" "$@"
}
# Debian's torch 1.13 runs its own (ATen) kernels at AVX2 unless told the
# CPU has more: ATEN_CPU_CAPABILITY=avx512 where it does (its cross-entropy
# at 2048 x 8192 took 62.8 ms with AVX2 and 30.5 ms with AVX-512 here, one
# run each).
aten_capability=default
grep -qw avx512f /proc/cpuinfo && aten_capability=avx512
run_debian() {
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 OPENBLAS_CORETYPE=$coretype \
  ATEN_CPU_CAPABILITY=$aten_capability \
    /usr/bin/python3 "$@"
}
