// Numerics mode (../shared/DESIGN.md, "Numerics modes"). `exact` (default) runs only kernels that
// obey the invariance rule. `fast` lets multi-row linear calls use a different reduction order, as
// a shape-specialized GEMM or BLAS would; `lockstep verify --numerics fast` measures how often that
// flips a generation. It exists to be measured against, never as the default.
//
// Quantized dot (CPU linears of 4/8-bit weights; the CUDA backend has its own path). `float`:
// each weight is dequantized exactly and the float dot schedule runs (quant_format.h: the bits of
// the dequantized float matrix). `int8`: activations are quantized to int8 per block and the dots
// are exact integer sums per group (quant_int8.h). Both obey the invariance rule; they are two
// different models' numerics, so they give different tokens from each other.
#pragma once

namespace lockstep::kernels {

enum class Numerics { Exact, Fast };

void set_numerics(Numerics mode);
Numerics numerics();

enum class QuantDot { Float, Int8 };
// The mode until set_quant_dot is called, and the CLI's when --quant-dot is not given: int8,
// measured faster than float on every shape and machine in docs/benchmarks.md.
inline constexpr QuantDot kDefaultQuantDot = QuantDot::Int8;

void set_quant_dot(QuantDot mode);
QuantDot quant_dot();
// "float" / "int8"; parse_quant_dot fails on anything else.
const char* quant_dot_name(QuantDot mode);
QuantDot parse_quant_dot(const char* name);

}  // namespace lockstep::kernels
