"""What a Python peer computes with, as it reports it: shared by the bench peers."""
import ctypes


def openblas_core():
    """", OpenBLAS <config> core <name> (<path>)" for the libopenblas this process mapped, else ""."""
    with open("/proc/self/maps") as f:
        for line in f:
            if "libopenblas" in line:
                path = line.split()[-1]
                lib = ctypes.CDLL(path)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                lib.openblas_get_config.restype = ctypes.c_char_p
                return f", OpenBLAS {lib.openblas_get_config().decode()} core {lib.openblas_get_corename().decode()} ({path})"
    return ""


def torch_loaded(torch):
    config = torch.__config__.show()
    blas = "MKL" if "BLAS_INFO=mkl" in config else "OpenBLAS" if "open" in config.lower() else "?"
    capability = next((l.split(":", 1)[1].strip() for l in config.splitlines() if "CPU capability" in l), "?")
    core = openblas_core() if blas == "OpenBLAS" else ""
    return f"torch {torch.__version__}, BLAS {blas}, CPU kernels {capability}, {torch.get_num_threads()} threads{core}"


def numpy_loaded(np):
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            name = line.split()[-1] if len(line.split()) > 5 else ""
            for key in ("openblas", "mkl_rt", "libblas", "blis"):
                if key in name:
                    libs.add(name)
    return f"numpy {np.__version__}, BLAS {', '.join(sorted(libs)) or '?'}{openblas_core()}"
