"""Plain-torch models unlike the bundled samples, for the optlevel test set (issue 7).

The bundled samples cover conv nets, a ViT and a detector. People run exports of other
models too, so these exercise what those emit at optlevel 0/1/2: recurrent layers, attention
with masks, split/chunk/stack/gather/where/einsum, shape arithmetic on `x.size()`, dense
concatenation, inverted residuals with squeeze-excitation, slicing with steps and negative
indices. Each builder returns (module in eval mode, example input); tools/export_optlevels.py
exports them. Sizes are tiny so each export stays a few KB.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F


class GruTextClassifier(nn.Module):
    """Token ids -> embedding -> bidirectional GRU -> LSTM -> mean over time + last step -> classes."""

    def __init__(self, vocab: int = 20, dim: int = 8, hidden: int = 6, classes: int = 3) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(2 * hidden, hidden, batch_first=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, ids):
        x = self.emb(ids)
        x, _ = self.gru(x)
        x, (h, _) = self.lstm(x)
        feat = torch.cat([x.mean(dim=1), h[-1]], dim=1)
        return F.log_softmax(self.fc(feat), dim=-1)


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: nn.MultiheadAttention with a causal mask, GELU MLP."""

    def __init__(self, dim: int = 16, heads: int = 2, seq: int = 6) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

    def forward(self, x):
        h = self.norm1(x)
        a, w = self.attn(h, h, h, attn_mask=self.mask, need_weights=True)
        x = x + a
        x = x + self.mlp(self.norm2(x))
        return x, w


class TensorOpsZoo(nn.Module):
    """split/chunk/stack/gather/where/einsum/interpolate/softmax/group norm/pixel shuffle/pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.proj = nn.Parameter(torch.randn(4, 5))

    def forward(self, x):
        y = self.gn(self.conv(x))  # (1,8,8,8)
        a, b = torch.split(y, [3, 5], dim=1)
        c1, c2 = torch.chunk(b, 2, dim=2)  # (1,5,4,8) each
        s = torch.stack([c1, c2], dim=0).sum(0)  # (1,5,4,8)
        idx = torch.argmax(s, dim=3, keepdim=True)  # (1,5,4,1)
        g = torch.gather(s, 3, idx)  # (1,5,4,1)
        w = torch.where(s > g * 0.5, s, torch.zeros_like(s))
        e = torch.einsum("bchw,hk->bckw", w, self.proj)  # (1,5,5,8)
        up = F.interpolate(a, scale_factor=2, mode="bilinear", align_corners=False)  # (1,3,16,16)
        ps = F.pixel_shuffle(y[:, :4], 2)  # (1,1,16,16)
        m = torch.cat([up, ps], 1)
        pooled = F.avg_pool2d(m, 2) + F.adaptive_max_pool2d(m, (8, 8))
        att = torch.softmax(pooled.flatten(2), dim=-1).view_as(pooled)
        return F.adaptive_avg_pool2d(att * pooled, 1).flatten(1), e.mean(dim=(2, 3))


class ShapeArithmetic(nn.Module):
    """Reshapes computed from x.size(): view(b, -1), reshape(b, c//2, 2, h, w), channel shuffle."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.conv(x)
        b, c, h, w = x.size()
        y = x.reshape(b, c // 2, 2, h, w).transpose(1, 2).reshape(b, c, h, w)  # channel shuffle
        z = y.view(b, c, -1).permute(0, 2, 1)  # (b, h*w, c)
        z = self.fc(z)  # (b, h*w, 4)
        z = z.transpose(1, 2).contiguous().view(x.size(0), 4, h, w)
        t = torch.flatten(z, 1)
        n = t.shape[1] // 2
        return t[:, :n] * t[:, n:], z.view(x.size(0), -1).sum(-1, keepdim=True)


class DenseNetMini(nn.Module):
    """DenseNet-style: every layer's output concatenated to its input; transitions with avg pool."""

    def __init__(self, growth: int = 4, layers: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        ch = 8
        self.blocks = nn.ModuleList()
        self.trans = nn.ModuleList()
        for _ in range(2):
            block = nn.ModuleList()
            for _ in range(layers):
                block.append(
                    nn.Sequential(nn.BatchNorm2d(ch), nn.ReLU(), nn.Conv2d(ch, growth, 3, padding=1, bias=False))
                )
                ch += growth
            self.blocks.append(block)
            self.trans.append(
                nn.Sequential(nn.BatchNorm2d(ch), nn.ReLU(), nn.Conv2d(ch, ch // 2, 1, bias=False), nn.AvgPool2d(2))
            )
            ch //= 2
        self.norm = nn.BatchNorm2d(ch)
        self.fc = nn.Linear(ch, classes)

    def forward(self, x):
        x = self.stem(x)
        for block, trans in zip(self.blocks, self.trans):
            for layer in block:
                x = torch.cat([x, layer(x)], 1)
            x = trans(x)
        x = F.relu(self.norm(x))
        return self.fc(F.adaptive_avg_pool2d(x, (1, 1)).view(x.size(0), -1))


class SqueezeExcite(nn.Module):
    def __init__(self, ch: int, r: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(ch, max(1, ch // r), 1)
        self.fc2 = nn.Conv2d(max(1, ch // r), ch, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, se: bool, act: type[nn.Module]) -> None:
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False),
            nn.BatchNorm2d(mid),
            act(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
            nn.BatchNorm2d(mid),
            act(),
            SqueezeExcite(mid) if se else nn.Identity(),
            nn.Conv2d(mid, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class MobileNetV2Mini(nn.Module):
    """MobileNetV2-style inverted residuals with ReLU6 and Hardswish, one with squeeze-excitation."""

    def __init__(self, classes: int = 6) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 8, 1, 2, False, nn.ReLU6),
            InvertedResidual(8, 12, 2, 3, True, nn.Hardswish),
            InvertedResidual(12, 12, 1, 2, True, nn.Hardswish),
        )
        self.head = nn.Sequential(
            nn.Conv2d(12, 16, 1),
            nn.Hardswish(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(0.2),
            nn.Linear(16, classes),
        )

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class IndexingZoo(nn.Module):
    """Slices with steps and negative bounds, flip (torch has no negative steps), index_select,
    a list index, masked_fill, cumsum, roll, narrow, select, unsqueeze/squeeze, expand, repeat."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("order", torch.tensor([2, 0, 1]))

    def forward(self, x):  # (1,3,6,8)
        a = x[:, :, 1:-1:2, ::3]  # (1,3,2,3)
        b = torch.flip(x, dims=[3])[..., -3:]  # (1,3,6,3)
        c = torch.index_select(x, 1, self.order)  # (1,3,6,8)
        d = c[:, -1, :, :].unsqueeze(1).expand(-1, 2, -1, -1)  # (1,2,6,8)
        e = d.masked_fill(d < 0, 0.0).cumsum(dim=-1)
        f = torch.roll(x, shifts=2, dims=2).narrow(3, 2, 4)  # (1,3,6,4)
        g = x.select(2, -1).squeeze(0).repeat(1, 2)  # (3,16)
        h = x[:, [0, 2]]  # (1,2,6,8)
        return a.sum((2, 3)) + b.mean((2, 3)), e + h, f, g


class AudioConv1d(nn.Module):
    """1-D conv net: conv1d + BatchNorm1d + max pool, reflect padding, transposed conv, upsample."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv1d(2, 6, 5, padding=2)
        self.bn = nn.BatchNorm1d(6)
        self.c2 = nn.Conv1d(6, 6, 3, dilation=2)
        self.up = nn.ConvTranspose1d(6, 4, 4, stride=2, padding=1)
        self.head = nn.Conv1d(4, 2, 1)

    def forward(self, x):  # (1,2,32)
        x = F.max_pool1d(F.silu(self.bn(self.c1(x))), 2)  # (1,6,16)
        x = self.c2(F.pad(x, (2, 2), mode="reflect"))  # (1,6,16)
        x = self.up(F.leaky_relu(x, 0.1))  # (1,4,32)
        x = F.interpolate(x, scale_factor=0.5, mode="nearest")  # (1,4,16)
        return torch.tanh(self.head(x))


def build(
    cls: type[nn.Module],
    seed: int,
    shape: tuple[Any, ...],
    *,
    ids: int | None = None,
    bn_shape: tuple[int, ...] | None = None,
    **kwargs: Any,
) -> tuple[nn.Module, Any]:
    """(module in eval mode, example input): random float input of `shape` (a tuple of
    shapes: one input each), or token ids below `ids`; BatchNorm statistics calibrated on
    inputs of `bn_shape` when given."""
    from samples.common import randomize_batchnorm

    torch.backends.mha.set_fastpath_enabled(False)  # the fused kernel makes traces differ (see export_samples.py)
    torch.manual_seed(seed)
    m = cls(**kwargs)
    if bn_shape is not None:
        randomize_batchnorm(m, batches=2, batch_size=4, input_shape=bn_shape)
    if isinstance(shape[0], tuple):  # several inputs
        return m.eval(), tuple(torch.randn(*s) for s in shape)
    x = torch.randint(0, ids, shape) if ids is not None else torch.randn(*shape)
    return m.eval(), x


class GptBlock(nn.Module):
    """A GPT-style block written by hand: RMSNorm, q/k/v from one linear, heads by view and
    transpose, a causal tril buffer cut to the sequence length, masked_fill, softmax; a second
    path through F.scaled_dot_product_attention(is_causal=True); a SwiGLU MLP."""

    def __init__(self, dim: int = 16, heads: int = 2, max_len: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.w1, self.w2, self.w3 = (
            nn.Linear(dim, 24, bias=False),
            nn.Linear(24, dim, bias=False),
            nn.Linear(dim, 24, bias=False),
        )
        self.g = nn.Parameter(torch.rand(dim) + 0.5)
        self.register_buffer("tril", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def rms(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.rms(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        att = att.masked_fill(self.tril[:, :, :T, :T] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        y2 = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = (y + y2).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        h = self.rms(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class UNetPad(nn.Module):
    """A UNet up step on odd sizes: transposed conv, F.pad by the size difference (diff // 2,
    diff - diff // 2), interpolate to the skip's size, concatenation."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.mid = nn.Conv2d(6, 6, 3, padding=1)
        self.up = nn.ConvTranspose2d(6, 3, 2, stride=2)
        self.out = nn.Conv2d(12, 2, 1)

    def forward(self, x):
        skip = x
        y = self.up(F.relu(self.mid(self.down(x))))
        dy, dx = skip.size(2) - y.size(2), skip.size(3) - y.size(3)
        y = F.pad(y, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        z = F.interpolate(self.mid(self.down(x)), size=skip.shape[2:], mode="bilinear", align_corners=True)
        return self.out(torch.cat([skip, y, z], dim=1))


class SwinWindows(nn.Module):
    """Swin-style shifted windows: roll, window partition by view/permute, attention by
    matmul in each window, window reverse, roll back; LayerNorm and an MLP."""

    def __init__(self, dim: int = 8, ws: int = 2) -> None:
        super().__init__()
        self.ws = ws
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 16), nn.GELU(approximate="tanh"), nn.Linear(16, dim))

    def forward(self, x):  # (B, H, W, C)
        B, H, W, C = x.shape
        ws = self.ws
        s = torch.roll(self.norm(x), shifts=(-1, -1), dims=(1, 2))
        win = s.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)
        q, k, v = self.qkv(win).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(1, 2) / C**0.5, dim=-1) @ v
        a = a.view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
        x = x + torch.roll(a, shifts=(1, 1), dims=(1, 2))
        return x + self.mlp(x)


class YoloDecode(nn.Module):
    """A detection head decoding boxes from the feature map's own size: meshgrid of aranges,
    sigmoid, exp, stack, view(b, na, no, ny, nx).permute, reshape(b, -1, no)."""

    def __init__(self, nc: int = 2, na: int = 2) -> None:
        super().__init__()
        self.na, self.no = na, nc + 5
        self.conv = nn.Conv2d(3, na * self.no, 3, stride=2, padding=1)
        self.register_buffer("anchors", torch.tensor([[1.0, 1.5], [2.0, 1.0]]).view(1, na, 1, 1, 2))

    def forward(self, x):
        p = self.conv(x)
        b, _, ny, nx = p.shape
        p = p.view(b, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
        xy = (p[..., 0:2].sigmoid() + grid) * 2.0
        wh = torch.exp(p[..., 2:4].clamp(max=4.0)) * self.anchors
        conf = p[..., 4:].sigmoid()
        return torch.cat((xy, wh, conf), -1).reshape(b, -1, self.no)


class NormActZoo(nn.Module):
    """InstanceNorm, F.normalize, PReLU, ELU, Softplus, Mish, grouped conv + channel shuffle,
    transposed conv with output_padding, bilinear upsample with align_corners, clamp,
    max with indices, topk, sort."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.prelu = nn.PReLU(8)
        self.gconv = nn.Conv2d(8, 8, 3, padding=1, groups=4)
        self.tconv = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)

    def forward(self, x):
        y = self.prelu(self.inorm(self.c1(x)))
        y = self.gconv(F.elu(y))
        b, c, h, w = y.shape
        y = y.view(b, 4, c // 4, h, w).transpose(1, 2).reshape(b, c, h, w)
        y = F.normalize(F.mish(y) + F.softplus(y), dim=1)
        t = self.tconv(y).clamp(-1.0, 1.0)  # (b,4,2h,2w)
        u = self.up(y[:, :4])  # (b,4,2h,2w)
        m, idx = torch.max(t + u, dim=1)
        top, _ = torch.topk(m.flatten(1), 5, dim=1)
        srt, order = torch.sort(m.flatten(1)[:, :7], dim=1, descending=True)
        return m, idx, top, srt, order


class RecurrentStates(nn.Module):
    """A 2-layer LSTM with initial states made by torch.zeros(…, x.size(0), …), and an
    LSTMCell / GRUCell unrolled over the time steps in Python (the trace unrolls the loop)."""

    def __init__(self, dim: int = 4, hidden: int = 5) -> None:
        super().__init__()
        self.hidden = hidden
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True, dropout=0.1)
        self.cell = nn.LSTMCell(dim, hidden)
        self.gru_cell = nn.GRUCell(hidden, hidden)
        self.fc = nn.Linear(3 * hidden, 2)

    def forward(self, x):  # (B, T, dim)
        b = x.size(0)
        h0 = torch.zeros(2, b, self.hidden)
        c0 = torch.ones(2, b, self.hidden) * 0.5
        out, (h, c) = self.lstm(x, (h0, c0))
        hc = (x.new_zeros(b, self.hidden), x.new_zeros(b, self.hidden))
        g = torch.zeros(b, self.hidden)
        for t in range(x.size(1)):
            hc = self.cell(x[:, t], hc)
            g = self.gru_cell(hc[0], g)
        return self.fc(torch.cat([out[:, -1], h[0] + c[1], g], dim=1))


class SpatialOps(nn.Module):
    """Padding modules, unfold (im2col) and fold, pixel_unshuffle, bmm, F.linear with a
    parameter, affine_grid + grid_sample (a spatial transformer), whole-tensor reductions."""

    def __init__(self) -> None:
        super().__init__()
        self.pads = nn.ModuleList([nn.ReflectionPad2d(1), nn.ReplicationPad2d((1, 0, 2, 1)), nn.ZeroPad2d(1)])
        self.w = nn.Parameter(torch.randn(5, 12) * 0.3)
        self.theta = nn.Linear(12, 6)

    def forward(self, x):  # (B, 3, 6, 6)
        p = self.pads[0](x) + self.pads[2](x)  # (B,3,8,8)
        q = self.pads[1](x)  # (B,3,9,7)
        cols = F.unfold(p, kernel_size=2, stride=2)  # (B,12,16)
        back = F.fold(cols * 2, output_size=(8, 8), kernel_size=2, stride=2)
        un = F.pixel_unshuffle(p, 2)  # (B,12,4,4)
        lin = F.linear(un.flatten(2).transpose(1, 2), self.w)  # (B,16,5)
        gram = torch.bmm(lin.transpose(1, 2), lin)  # (B,5,5)
        theta = torch.tanh(self.theta(un.mean((2, 3)))).view(-1, 2, 3)
        grid = F.affine_grid(theta, [x.size(0), 3, 6, 6], align_corners=False)
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return back, q.sum(), gram, warped, x.mean()


class ScalarsAndCasts(nn.Module):
    """torch.cat with a constant scalar tensor, max over a dim with [0], norm, std, sign/abs,
    hardtanh, logical ops and casts, an interpolate size from int(x.shape[2] * 1.5), and
    float(x.size(1)) arithmetic."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 1)

    def forward(self, x):  # (B, 2, H, W)
        y = self.conv(x)
        b = y.size(0)
        extra = torch.tensor([0.5]).expand(b, 1)  # a constant scalar joined on
        m = y.max(dim=1)[0]  # (B,H,W)
        feat = torch.cat([extra, m.flatten(1).norm(dim=1, keepdim=True), y.std(dim=(2, 3))], dim=1)
        mask = torch.logical_and(y > 0, y.abs() < 1.0)
        z = torch.where(mask, torch.sign(y), F.hardtanh(y * 2.0)).float()
        size = (int(x.shape[2] * 1.5), int(x.shape[3] * 1.5))
        up = F.interpolate(z, size=size, mode="nearest")
        scale = float(x.size(1)) / 4.0
        return feat * scale, up, mask.long().sum(dim=1)


class Video3d(nn.Module):
    """3-D convolution over (frames, H, W): Conv3d, BatchNorm3d, ReLU, MaxPool3d,
    AdaptiveAvgPool3d, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv3d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm3d(4)
        self.c2 = nn.Conv3d(4, 4, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        self.fc = nn.Linear(4, 3)

    def forward(self, x):  # (B, 2, T, H, W)
        x = F.max_pool3d(F.relu(self.bn(self.c1(x))), (1, 2, 2))
        x = F.adaptive_avg_pool3d(self.c2(x), 1)
        return self.fc(torch.flatten(x, 1))


class TextTransformer(nn.Module):
    """Token ids -> embeddings + learned positions from torch.arange(T), one
    nn.TransformerEncoderLayer with a causal mask made in forward (torch.triu of ones(T, T)),
    a padding-aware mean (ids != 0), one_hot features; log_softmax classes."""

    def __init__(self, vocab: int = 16, dim: int = 16, max_len: int = 12, classes: int = 3) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.enc = nn.TransformerEncoderLayer(
            dim, 2, dim_feedforward=24, dropout=0.0, activation="gelu", batch_first=True
        )
        self.fc = nn.Linear(dim + 4, classes)

    def forward(self, ids):  # (B, T) int64
        t = ids.size(1)
        pos = torch.arange(t).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        causal = torch.triu(torch.ones(t, t), diagonal=1).bool()
        x = self.enc(x, src_mask=causal)
        m = (ids != 0).float()
        mean = (x * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True).clamp(min=1.0)
        hot = F.one_hot(ids % 4, 4).float().mean(1)
        return F.log_softmax(self.fc(torch.cat([mean, hot], -1)), dim=-1)


class TwoInputs(nn.Module):
    """An image and a vector in, a nested tuple out: 'same' and circular-padded convs,
    repeat_interleave, tile, broadcast_to, var_mean, layer_norm over x.shape[-1:], LogSoftmax,
    Softmax2d, a scale of 1/sqrt(size(-1))."""

    def __init__(self) -> None:
        super().__init__()
        self.same = nn.Conv2d(3, 4, 3, padding="same", padding_mode="reflect")
        self.circ = nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular")
        self.vec = nn.Linear(5, 4)
        self.logsm = nn.LogSoftmax(dim=1)
        self.sm2d = nn.Softmax2d()

    def forward(self, img, v):  # (B,3,H,W), (B,5)
        y = self.circ(F.relu(self.same(img)))  # (B,4,H,W)
        gate = torch.sigmoid(self.vec(v))[:, :, None, None]  # (B,4,1,1)
        y = y * gate.broadcast_to(y.shape)
        var, mean = torch.var_mean(y, dim=(2, 3))  # (B,4) each
        rep = torch.repeat_interleave(mean, 2, dim=1)  # (B,8)
        tiled = torch.tile(v[:, :2], (1, 4))  # (B,8)
        z = F.layer_norm(rep * tiled, rep.shape[-1:]) / (rep.size(-1) ** 0.5)
        return (self.logsm(z), (self.sm2d(y), var))


class MetricHead(nn.Module):
    """Embedding-comparison and odd-op head: cdist, cosine_similarity, pairwise_distance,
    argsort, median, kthvalue, addcmul, lerp, maximum, einsum, baddbmm, LocalResponseNorm,
    LPPool2d, bicubic and area interpolation, SELU/CELU/Softsign/Tanhshrink/LogSigmoid/GLU."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.lrn = nn.LocalResponseNorm(3)
        self.lp = nn.LPPool2d(2, 2)
        self.proto = nn.Parameter(torch.randn(4, 8))
        self.acts = nn.ModuleList([nn.SELU(), nn.CELU(0.5), nn.Softsign(), nn.Tanhshrink(), nn.LogSigmoid()])

    def forward(self, x):  # (B,3,H,W)
        f = self.lrn(self.conv(x))
        p = self.lp(F.relu(f))  # (B,8,H/2,W/2)
        up = F.interpolate(p, scale_factor=2, mode="bicubic", align_corners=False)
        area = F.interpolate(f, size=(3, 3), mode="area")
        emb = f.mean((2, 3))  # (B,8)
        d = torch.cdist(emb.unsqueeze(0), self.proto.unsqueeze(0)).squeeze(0)  # (B,4)
        cos = F.cosine_similarity(emb.unsqueeze(1), self.proto.unsqueeze(0), dim=-1)
        pd = F.pairwise_distance(emb, self.proto[:1].expand_as(emb))
        order = torch.argsort(d, dim=1)
        med, _ = torch.median(f.flatten(2), dim=2)
        kth, _ = torch.kthvalue(f.flatten(2), 3, dim=2)
        mix = torch.lerp(med, kth, 0.25)
        mix = torch.addcmul(mix, med, kth, value=0.5)
        mix = torch.maximum(mix, torch.zeros_like(mix))
        gram = torch.einsum("bc,kc->bk", emb, self.proto)
        bb = torch.baddbmm(gram.unsqueeze(1), emb.unsqueeze(1), self.proto.t().unsqueeze(0).expand(emb.size(0), -1, -1))
        a = sum(act(mix) for act in self.acts)
        g = F.glu(torch.cat([mix, a], 1), dim=1)
        return up + f, area, d + cos, pd, order, g, bb.squeeze(1)


class UNet3dMini(nn.Module):
    """A 3-D UNet step: Conv3d, MaxPool3d, ConvTranspose3d, trilinear upsample, cat."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.ReLU())
        self.down = nn.MaxPool3d(2)
        self.mid = nn.Conv3d(4, 4, 3, padding=1)
        self.up_t = nn.ConvTranspose3d(4, 2, 2, stride=2)
        self.out = nn.Conv3d(4 + 2 + 4, 2, 1)

    def forward(self, x):  # (B,1,D,H,W), even sizes
        e = self.enc(x)
        m = F.relu(self.mid(self.down(e)))
        u1 = self.up_t(m)
        u2 = F.interpolate(m, scale_factor=2, mode="trilinear", align_corners=False)
        return self.out(torch.cat([e, u1, u2], 1))


class ModulesZoo(nn.Module):
    """The nn.* module forms of ops met above as functions: Unfold, Fold, PixelUnshuffle,
    Unflatten, ChannelShuffle, Bilinear, CosineSimilarity, PairwiseDistance, Softmin,
    Hardshrink, Threshold, GLU."""

    def __init__(self) -> None:
        super().__init__()
        self.unfold, self.fold = nn.Unfold(2, stride=2), nn.Fold((4, 6), 2, stride=2)
        self.unshuffle, self.shuffle = nn.PixelUnshuffle(2), nn.ChannelShuffle(2)
        self.unflatten = nn.Unflatten(1, (2, 6))
        self.bilinear = nn.Bilinear(6, 6, 3)
        self.cos, self.dist = nn.CosineSimilarity(dim=1), nn.PairwiseDistance()
        self.acts = nn.Sequential(nn.Softmin(dim=1), nn.Hardshrink(0.1), nn.Threshold(0.05, -1.0))
        self.glu = nn.GLU(dim=1)

    def forward(self, x):  # (B, 3, 4, 6)
        cols = self.unfold(x)  # (B, 12, 6)
        back = self.fold(cols * 0.5)  # (B, 3, 4, 6)
        un = self.shuffle(self.unshuffle(x))  # (B, 12, 2, 3)
        u = self.unflatten(un.flatten(2).mean(2))  # (B, 2, 6)
        a, b = u[:, 0], u[:, 1]
        bil = self.bilinear(a, b)  # (B, 3)
        return back, self.acts(bil), self.cos(a, b) + self.dist(a, b), self.glu(cols)


class DtypeZoo(nn.Module):
    """Dtypes and special values: float64 arithmetic (.double()), isnan/isinf, nan_to_num,
    ~mask (bitwise_not), erf, pow(0.5), int division, a sum in float64, casts back."""

    def forward(self, x):  # (B, 4, 5)
        d = x.double() * 1e-3
        y = torch.where(x > 0, torch.log(x), torch.full_like(x, float("nan")))
        bad = torch.isnan(y) | torch.isinf(y)
        clean = torch.nan_to_num(y, nan=0.0).masked_fill(~bad, 1.0)
        e = torch.erf(x) + x.abs().pow(0.5)
        q = (x * 10).long() // 3
        s = d.sum(dim=-1, dtype=torch.float64)
        return clean + e, q, (s * 1e3).float(), bad.long().sum(1)
