# problem: softmax_fp32
# expect: compile_error
# reason: error
# needs: any
"""A CUDA candidate whose kernel does not compile: a statement is missing its semicolon.

The evaluator must report compile_error with the compiler's first error line, on a GPU machine
(a real load_inline build) and on a CPU machine (an nvcc compile check) alike.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n_cols) {
    const float* row_in = in + blockIdx.x * n_cols;
    float* row_out = out + blockIdx.x * n_cols;
    float row_max = -INFINITY   // <- the missing semicolon
    for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) row_max = fmaxf(row_max, row_in[c]);
    for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) row_out[c] = expf(row_in[c] - row_max);
}

torch::Tensor softmax_fp32_cuda(torch::Tensor x) {
    auto out = torch::empty_like(x);
    softmax_rows_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.size(1));
    return out;
}
"""

softmax_ext = load_inline(
    name="softmax_fp32_cuda_broken",
    cpp_sources="torch::Tensor softmax_fp32_cuda(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["softmax_fp32_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_fp32_cuda(x)
