"""Honest Triton solution for linear_bias_gelu_fp16: a tensor-core matmul with x @ W^T read in place
(W's strides, no transpose copy) and the bias add and GELU fused into the epilogue on the fp32
accumulator, so the output is written once and rounded to fp16 once.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_bias_gelu_kernel(
    y_ptr,  # *fp16, [M, N] output
    x_ptr,  # *fp16, [M, K] input rows
    w_ptr,  # *fp16, [N, K] nn.Linear weight, read as its transpose [K, N] through the strides
    bias_ptr,  # *fp16, [N]
    M,  # rows of x and y (tokens)
    N,  # out_features
    K,  # in_features, the reduced dimension
    stride_xm,  # elements between rows of x
    stride_xk,  # elements between columns of x
    stride_wn,  # elements between rows of W (one output feature each)
    stride_wk,  # elements between columns of W
    stride_ym,  # elements between rows of y
    stride_yn,  # elements between columns of y
    BLOCK_M: tl.constexpr,  # rows of y per program
    BLOCK_N: tl.constexpr,  # columns of y per program
    BLOCK_K: tl.constexpr,  # depth of one K step
    GROUP_M: tl.constexpr,  # tile rows per group: neighbouring programs share W tiles in L2
):
    # Grouped ordering: walk GROUP_M tile rows down a column of tiles before moving right.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows/columns past the edge wrap (modulo) so loads need no M/N mask; the store masks them.
    offs_xm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_wn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_xm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    wt_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_wn[None, :] * stride_wn  # [BLOCK_K, BLOCK_N] of W^T

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kt * BLOCK_K  # the last K step is partial: zero-fill past K
        a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(wt_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)  # fp16 tensor-core products, fp32 accumulation
        x_ptrs += BLOCK_K * stride_xk
        wt_ptrs += BLOCK_K * stride_wk

    offs_ym = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_yn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + offs_yn, mask=offs_yn < N, other=0.0).to(tl.float32)
    z = acc + bias[None, :]
    y = 0.5 * z * (1.0 + tl.erf(z * 0.7071067811865476))  # exact (erf) GELU, as nn.GELU()
    y_ptrs = y_ptr + offs_ym[:, None] * stride_ym + offs_yn[None, :] * stride_yn
    y_mask = (offs_ym[:, None] < M) & (offs_yn[None, :] < N)
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=y_mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        # Holds the parameters only (state_dict keys linear.weight, linear.bias, as the reference);
        # the kernel does all the compute.
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float16)
        with torch.no_grad():
            self.linear.bias.copy_(torch.randn(out_features, dtype=torch.float16) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight  # [N, K]
        n_out, k = w.shape
        x2 = x.reshape(-1, k)
        m = x2.shape[0]
        y = torch.empty((m, n_out), dtype=x.dtype, device=x.device)
        # fp16 on tensor cores: 128 x 256 tiles, 64-deep K steps, 3 stages (144 KiB of shared memory).
        block_m, block_n, block_k = 128, 256, 64
        grid = (triton.cdiv(m, block_m) * triton.cdiv(n_out, block_n),)
        linear_bias_gelu_kernel[grid](
            y,
            x2,
            w,
            self.linear.bias,
            m,
            n_out,
            k,
            x2.stride(0),
            x2.stride(1),
            w.stride(0),
            w.stride(1),
            y.stride(0),
            y.stride(1),
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            GROUP_M=8,
            num_warps=8,
            num_stages=3,
        )
        return y.view(*x.shape[:-1], n_out)
