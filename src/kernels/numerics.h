// Numerics mode (../shared/DESIGN.md, "Numerics modes"). `exact` (default) runs only kernels that
// obey the invariance rule. `fast` lets multi-row linear calls use a different reduction order, as
// a shape-specialized GEMM or BLAS would; `lockstep verify --numerics fast` measures how often that
// flips a generation. It exists to be measured against, never as the default.
#pragma once

namespace lockstep::kernels {

enum class Numerics { Exact, Fast };

void set_numerics(Numerics mode);
Numerics numerics();

}  // namespace lockstep::kernels
