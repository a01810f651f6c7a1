// nova.hpp - the one include a Nova user needs.
//
// No MLIR or LLVM header is reached from here: user code compiles in seconds
// and links against libnova.
#pragma once

#include "nova/cache.hpp"
#include "nova/distributed.hpp"
#include "nova/dtype.hpp"
#include "nova/error.hpp"
#include "nova/executable.hpp"
#include "nova/executable_desc.hpp"
#include "nova/explain.hpp"
#include "nova/expr/expr.hpp"
#include "nova/expr/ops.hpp"
#include "nova/jit.hpp"
#include "nova/nn/gpt.hpp"
#include "nova/nn/layers.hpp"
#include "nova/nn/losses.hpp"
#include "nova/io/safetensors.hpp"
#include "nova/data/tokens.hpp"
#include "nova/optim/adamw.hpp"
#include "nova/optim/clip.hpp"
#include "nova/optim/sgd.hpp"
#include "nova/memory.hpp"
#include "nova/params.hpp"
#include "nova/precision.hpp"
#include "nova/profile.hpp"
#include "nova/progress.hpp"
#include "nova/shape.hpp"
#include "nova/target.hpp"
#include "nova/tensor.hpp"
#include "nova/timeline.hpp"
#include "nova/train.hpp"
