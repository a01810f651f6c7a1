# lit configuration for Nova's IR tests: nova-opt + FileCheck.
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "Nova"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.nova_obj_root, "tests", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["nova-opt", "nova-gpu-kernels", "not"], [config.nova_tools_dir, config.llvm_tools_dir])

# PTX from the CUDA target is assembled by ptxas when the CUDA toolkit is
# installed (tests marked REQUIRES: ptxas; scripts/dev.sh test checks that it
# is, so CI never skips them). %extract-ptx prints the PTX of a gpu.binary.
import shutil
import sys
ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
config.substitutions.append(("%extract-ptx", sys.executable + " " + os.path.join(config.test_source_root, "cuda", "extract_ptx.py")))
config.substitutions.append(("%python", sys.executable))
config.excludes.append("extract_ptx.py")
config.excludes.append("many_updates.py")
config.excludes.append("templates")
