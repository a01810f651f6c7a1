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
llvm_config.add_tool_substitutions(["nova-opt"], [config.nova_tools_dir, config.llvm_tools_dir])
