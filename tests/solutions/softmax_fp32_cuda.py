"""Honest CUDA solution for softmax_fp32: one thread block per row, warp-shuffle reductions.

Each block walks its row three times (max, sum of exponentials, write); a 4096-float row is 16 KiB,
so the second and third passes mostly hit L1/L2. The max is subtracted before exp so that exp
never overflows, as torch.softmax does.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <math.h>

namespace {

constexpr int kThreadsPerRow = 256;  // one block per row: 8 warps stride over the row
constexpr int kWarpSize = 32;

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

// Block-wide reductions: each warp reduces with shuffles, warp 0 reduces the per-warp
// partials held in shared memory, and every thread reads the result back.
// `partials` holds one float per warp; the trailing barrier lets the caller reuse it.
__device__ float block_max(float v, float* partials) {
    const int lane = threadIdx.x % kWarpSize;
    const int warp = threadIdx.x / kWarpSize;
    const int n_warps = blockDim.x / kWarpSize;
    v = warp_max(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < n_warps ? partials[lane] : -INFINITY;
        v = warp_max(v);
        if (lane == 0) partials[0] = v;
    }
    __syncthreads();
    const float result = partials[0];
    __syncthreads();
    return result;
}

__device__ float block_sum(float v, float* partials) {
    const int lane = threadIdx.x % kWarpSize;
    const int warp = threadIdx.x / kWarpSize;
    const int n_warps = blockDim.x / kWarpSize;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < n_warps ? partials[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) partials[0] = v;
    }
    __syncthreads();
    const float result = partials[0];
    __syncthreads();
    return result;
}

__global__ void softmax_rows_kernel(
    const float* __restrict__ in,   // [n_rows, n_cols], row-major, contiguous
    float* __restrict__ out,        // [n_rows, n_cols], row-major, contiguous
    int64_t n_cols) {               // row length
    __shared__ float partials[kWarpSize];  // one slot per warp (at most 32 warps per block)
    const int64_t row = blockIdx.x;
    const float* row_in = in + row * n_cols;
    float* row_out = out + row * n_cols;

    float row_max = -INFINITY;
    for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) {
        row_max = fmaxf(row_max, row_in[c]);
    }
    row_max = block_max(row_max, partials);

    float denom = 0.0f;
    for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) {
        denom += expf(row_in[c] - row_max);
    }
    denom = block_sum(denom, partials);

    const float inv_denom = 1.0f / denom;
    for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) {
        row_out[c] = expf(row_in[c] - row_max) * inv_denom;
    }
}

}  // namespace

torch::Tensor softmax_fp32_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "softmax_fp32_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_fp32_cuda: x must be float32");
    TORCH_CHECK(x.dim() == 2, "softmax_fp32_cuda: x must be [rows, cols]");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t n_rows = x.size(0);
    const int64_t n_cols = x.size(1);
    if (n_rows == 0 || n_cols == 0) return out;
    TORCH_CHECK(n_rows <= 2147483647LL, "softmax_fp32_cuda: too many rows for a 1-D grid");
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    softmax_rows_kernel<<<static_cast<unsigned int>(n_rows), kThreadsPerRow, 0, stream>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), n_cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor softmax_fp32_cuda(torch::Tensor x);"

softmax_ext = load_inline(
    name="softmax_fp32_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_fp32_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_fp32_cuda(x)
