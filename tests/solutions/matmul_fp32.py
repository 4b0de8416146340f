"""Honest Triton solution for matmul_fp32: a tiled matmul with grouped tile order, true fp32.

tl.dot with input_precision="ieee" keeps full fp32 products (no TF32), which the 1e-4 tolerance needs.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    c_ptr,  # *fp32, [M, N] output
    a_ptr,  # *fp32, [M, K] left operand
    b_ptr,  # *fp32, [K, N] right operand
    M,  # rows of A and C
    N,  # columns of B and C
    K,  # the reduced dimension
    stride_am,  # elements between rows of A
    stride_ak,  # elements between columns of A
    stride_bk,  # elements between rows of B
    stride_bn,  # elements between columns of B
    stride_cm,  # elements between rows of C
    stride_cn,  # elements between columns of C
    BLOCK_M: tl.constexpr,  # rows of C per program
    BLOCK_N: tl.constexpr,  # columns of C per program
    BLOCK_K: tl.constexpr,  # depth of one K step
    GROUP_M: tl.constexpr,  # tile rows per group: neighbouring programs share B tiles in L2
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

    # Rows/columns past the edge wrap (modulo) so A and B loads need no M/N mask; the store masks them.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kt * BLOCK_K  # the last K step is partial: zero-fill past K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # fp32 FMA, no TF32
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        # fp32 on FMA units: 128 x 128 tiles, 32-deep K steps, 3 stages (96 KiB of shared memory).
        block_m, block_n, block_k, warps, stages = 128, 128, 32, 8, 3
        grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
        matmul_kernel[grid](
            c,
            a,
            b,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            GROUP_M=8,
            num_warps=warps,
            num_stages=stages,
        )
        return c
