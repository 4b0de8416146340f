"""Honest Triton solution for conv2d_relu_fp32: an implicit-GEMM direct convolution in true fp32.

GEMM view: rows = output pixels (n, oh, ow), columns = output channels, reduction = (kh, kw, c_in).
The input patch is gathered on the fly (padding by masks), never materialised (no im2col buffer);
bias and ReLU are applied to the accumulator. tl.dot uses input_precision="ieee": no TF32.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv2d_relu_kernel(
    out_ptr,  # *fp32, [N, C_out, H_out, W_out], contiguous
    x_ptr,  # *fp32, [N, C_in, H, W], contiguous
    w_ptr,  # *fp32, [C_out, C_in, KH, KW], contiguous
    bias_ptr,  # *fp32, [C_out]
    N,  # batch size
    C_in,  # input channels
    H,  # input height
    W,  # input width
    C_out,  # output channels
    H_out,  # output height
    W_out,  # output width
    stride,  # convolution stride (both axes)
    pad,  # zero padding (both axes)
    KH: tl.constexpr,  # kernel height
    KW: tl.constexpr,  # kernel width
    BLOCK_M: tl.constexpr,  # output pixels per program
    BLOCK_N: tl.constexpr,  # output channels per program
    BLOCK_K: tl.constexpr,  # input channels per reduction step
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # flat output pixel index over (n, oh, ow)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel
    offs_c = tl.arange(0, BLOCK_K)  # input channel within a step
    hw_out = H_out * W_out
    m_mask = offs_m < N * hw_out
    n_mask = offs_n < C_out
    img = offs_m // hw_out
    pix = offs_m % hw_out
    oh = pix // W_out
    ow = pix % W_out

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kh in tl.static_range(KH):
        for kw in tl.static_range(KW):
            ih = oh * stride - pad + kh
            iw = ow * stride - pad + kw
            in_bounds = m_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)  # padding = masked loads
            x_base = img * (C_in * H * W) + ih * W + iw  # x[img, 0, ih, iw]
            for c0 in range(0, C_in, BLOCK_K):
                c = c0 + offs_c
                c_mask = c < C_in
                a = tl.load(
                    x_ptr + x_base[:, None] + c[None, :] * (H * W),
                    mask=in_bounds[:, None] & c_mask[None, :],
                    other=0.0,
                )  # [BLOCK_M, BLOCK_K]
                b = tl.load(
                    w_ptr + offs_n[None, :] * (C_in * KH * KW) + c[:, None] * (KH * KW) + (kh * KW + kw),
                    mask=c_mask[:, None] & n_mask[None, :],
                    other=0.0,
                )  # [BLOCK_K, BLOCK_N]
                acc = tl.dot(a, b, acc, input_precision="ieee")  # fp32 FMA, no TF32

    bias = tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0)
    out_offs = (img * (C_out * hw_out) + pix)[:, None] + offs_n[None, :] * hw_out
    tl.store(out_ptr + out_offs, y, mask=m_mask[:, None] & n_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        # Holds the parameters only (state_dict keys conv.weight, conv.bias, as the reference);
        # the kernel does all the compute.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.conv.weight.contiguous()
        n, c_in, h, w = x.shape
        c_out, _, kh, kw = weight.shape
        stride, pad = self.conv.stride[0], self.conv.padding[0]
        h_out = (h + 2 * pad - kh) // stride + 1
        w_out = (w + 2 * pad - kw) // stride + 1
        out = torch.empty((n, c_out, h_out, w_out), dtype=x.dtype, device=x.device)
        # fp32 on FMA units: 128 pixels x up to 128 channels per program; dot dims must be >= 16.
        block_m = 128
        block_n = max(16, min(128, triton.next_power_of_2(c_out)))
        block_k = max(16, min(32, triton.next_power_of_2(c_in)))
        grid = (triton.cdiv(n * h_out * w_out, block_m), triton.cdiv(c_out, block_n))
        conv2d_relu_kernel[grid](
            out,
            x,
            weight,
            self.conv.bias,
            n,
            c_in,
            h,
            w,
            c_out,
            h_out,
            w_out,
            stride,
            pad,
            KH=kh,
            KW=kw,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            num_warps=8,
            num_stages=3,
        )
        return out
