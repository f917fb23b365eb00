"""More small models in the styles people write, for the passes' done-criterion "we check
the same on optlevel-1 exports of our own models": each is exported at optlevel 1 and 2 by
tools/export_pass_models.py into tests/data/passes/NAME and checked by
tests/test_passes_real.py (-O2 matches PyTorch with no more operators than pnnx's optlevel 2).

    mobilenetv2     inverted residuals: Conv+BN+ReLU6, depthwise, residual add, dropout, linear
    size_arith      shapes computed from x.shape: views, halves by size()//2, flatten/unflatten, expand_as
    bn_after        BN after ConvTranspose1d/2d (no bias), grouped Conv1d, Linear without bias
    pads            ZeroPad2d, ReflectionPad2d, an asymmetric pad, a pad on a padded conv, a non-zero
                    constant pad, one pad feeding two convs, ReplicationPad1d before Conv1d
    noops           dropouts of every kind, identity, contiguous, view to its own shape, x*1+0, /1-0,
                    one-input cat, full slice, ×1 interpolate, zero pad, cancelling permutes/transposes
    chain           long chains of elementwise functions with operands read twice
    sdpa            F.scaled_dot_product_attention, nn.MultiheadAttention, LayerNorm
    se_block        squeeze-excitation with nn.Linear on a pooled view, expand_as
    timm_attention  timm's Attention (qkv.unbind, q * scale, softmax)
    norms           F.layer_norm then * w + b; an RMSNorm written out (FusePatterns → nn.RMSNorm)
    spatial         space-to-depth by view/permute/reshape (→ nn.PixelUnshuffle), einsum, type_as,
                    max pool with indices, a no-op expand
    focus           YOLOv5's Focus (strided slices of slices), SiLU, nearest ×2 upsample, SPP-like cat
    pixel_shuffle   depth-to-space by view/permute/reshape (→ nn.PixelShuffle)
    rms_variants    RMSNorm as x / sqrt(mean(x*x)+eps) and w * (x * rsqrt(…)) in one expression
                    (pnnx fuses neither when both share one expression; neither do we)
    linear_bn_3d    Linear on the last dim, BatchNorm1d over dim 1: pnnx's optlevel 2 folds the BN
                    into the Linear and computes a wrong answer (PNNX_O2_WRONG); we keep both
    shared_outputs  a conv read by its BN and by others, a pad read by two convs and a pool
    two_in_two_out  two inputs, two outputs, one conv applied to both inputs
"""

from __future__ import annotations

# Cases where pnnx's own optlevel-2 export does not compute what PyTorch does: the export
# keeps pnnx's optlevel-2 weights too, and the test checks that they are wrong and ours right.
PNNX_O2_WRONG = {"linear_bn_3d": "pnnx folds a BatchNorm1d over dim 1 into a Linear over the last dim"}


def build_style_cases():  # torch is imported here so the module docstring reads without it
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hid = cin * expand
            self.use_res = stride == 1 and cin == cout
            layers = []
            if expand != 1:
                layers += [nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(inplace=True)]
            layers += [
                nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False),
                nn.BatchNorm2d(hid),
                nn.ReLU6(inplace=True),
                nn.Conv2d(hid, cout, 1, bias=False),
                nn.BatchNorm2d(cout),
            ]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True))
            self.blocks = nn.Sequential(
                InvertedResidual(8, 8, 1, 1), InvertedResidual(8, 12, 2, 4), InvertedResidual(12, 12, 1, 4)
            )
            self.head = nn.Sequential(nn.Conv2d(12, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(inplace=True))
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10))

        def forward(self, x):
            x = self.head(self.blocks(self.stem(x)))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.classifier(x)

    class ShapeArith(nn.Module):
        """Shapes computed from x.shape: views, flatten/unflatten, halves by size()//2, expand_as."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x):
            b, c, h, w = x.shape
            y = x.view(b, c * h, w)
            y = self.fc(y)
            y = y.reshape(b, c, h * w)
            half = y.size(-1) // 2
            a, r = y[..., :half], y[..., half:]
            z = torch.cat([r, a], dim=-1).view(b, c, h, w)
            m = z.mean(dim=(2, 3), keepdim=True).expand_as(z)
            z = (z - m).flatten(2).unflatten(2, (h, w))
            t = z.reshape(b * c, h * w).transpose(0, 1).contiguous().view(h * w, b, c)
            return t.permute(1, 2, 0).reshape(x.size(0), x.size(1), x.size(2), -1) + x.new_ones(1) * 0.5

    class BNAfter(nn.Module):
        """BN after ConvTranspose1d/2d, Linear, Conv1d."""

        def __init__(self):
            super().__init__()
            self.ct1, self.b1 = nn.ConvTranspose1d(4, 6, 3, stride=2), nn.BatchNorm1d(6)
            self.c1, self.b2 = nn.Conv1d(6, 6, 3, padding=1, groups=3), nn.BatchNorm1d(6)
            self.fc, self.b3 = nn.Linear(6 * 11, 16, bias=False), nn.BatchNorm1d(16)
            self.ct2, self.b4 = nn.ConvTranspose2d(1, 3, 2, stride=2, bias=False), nn.BatchNorm2d(3)

        def forward(self, x):
            y = F.relu(self.b1(self.ct1(x)))
            y = self.b2(self.c1(y))
            z = self.b3(self.fc(y.flatten(1)))
            return self.b4(self.ct2(z.view(-1, 1, 4, 4)))

    class Pads(nn.Module):
        """Pads before convs in every way people write them."""

        def __init__(self):
            super().__init__()
            self.zp, self.c1 = nn.ZeroPad2d(1), nn.Conv2d(3, 4, 3)
            self.rp, self.c2 = nn.ReflectionPad2d(2), nn.Conv2d(4, 4, 5)
            self.ap, self.c3 = nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(4, 4, 3, stride=2)  # asymmetric: stays a pad
            self.c4 = nn.Conv2d(4, 4, 3, padding=1)  # pad on top of its own padding
            self.cp, self.c5 = nn.ConstantPad2d(1, 0.5), nn.Conv2d(4, 4, 3)  # non-zero value: stays
            self.c6, self.c7 = nn.Conv2d(4, 2, 3), nn.Conv2d(4, 2, 3)  # one pad, two convs
            self.rep, self.c1d = nn.ReplicationPad1d(1), nn.Conv1d(2, 2, 3)

        def forward(self, x):
            x = F.relu(self.c1(self.zp(x)))
            x = self.c2(self.rp(x))
            x = self.c3(self.ap(x))
            x = self.c4(F.pad(x, (1, 1, 1, 1)))
            x = self.c5(self.cp(x))
            p = F.pad(x, (1, 1, 1, 1))
            x = self.c6(p) + self.c7(p)
            return self.c1d(self.rep(x.flatten(2)))

    class NoOps(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(4, 4, 1)
            self.d1, self.d2, self.d3, self.i = nn.Dropout(0.5), nn.Dropout2d(0.3), nn.AlphaDropout(0.1), nn.Identity()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            x = self.i(self.d2(self.d1(self.c(x))))
            x = x.contiguous().view(x.shape) * 1 + 0
            x = torch.cat([x], 1)[:, :, :, :]
            x = F.interpolate(x, scale_factor=1, mode="nearest")
            x = F.pad(x, (0, 0, 0, 0))
            x = x.permute(0, 2, 3, 1).permute(0, 3, 1, 2)
            x = x.transpose(2, 3).transpose(2, 3)
            x = self.d3(x) / 1 - 0
            x = x.reshape(1, 4, -1).reshape(1, 4, 4, 4)
            x = F.dropout(x, 0.1, training=False)
            return self.fc(x.permute(0, 2, 3, 1))

    class Chain(nn.Module):
        """Chained elementwise functions with residual reads."""

        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 3, 1)

        def forward(self, x):
            y = self.c(x)
            z = torch.sigmoid(y * 2 + 1) - 0.5
            z = F.relu(z) * torch.tanh(y) + torch.abs(y) / (1 + torch.exp(-y))
            z = torch.clamp(z, -1, 1) * 3 - y
            z = F.silu(z) + F.hardswish(y) + F.leaky_relu(z, 0.1)
            for _ in range(12):
                z = z * 0.9 + torch.sin(z) * 0.1 + 0.01
            return F.gelu(z) + torch.sqrt(torch.abs(z) + 1e-3) * F.elu(z)

    class SDPA(nn.Module):
        """F.scaled_dot_product_attention and nn.MultiheadAttention."""

        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(16, 48)
            self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
            self.ln = nn.LayerNorm(16)

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, 4, 4).permute(2, 0, 3, 1, 4).unbind(0)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)
            y = self.ln(x + a)
            return y + self.mha(y, y, y, need_weights=False)[0]

    class SEBlock(nn.Module):
        """Squeeze-excitation as nn.Linear on a pooled, flattened tensor, scale via view."""

        def __init__(self):
            super().__init__()
            self.c, self.bn = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.fc1, self.fc2 = nn.Linear(8, 2), nn.Linear(2, 8)

        def forward(self, x):
            y = F.relu(self.bn(self.c(x)))
            b, c, _, _ = y.size()
            w = F.adaptive_avg_pool2d(y, 1).view(b, c)
            w = torch.sigmoid(self.fc2(F.relu(self.fc1(w)))).view(b, c, 1, 1)
            return F.relu(y * w.expand_as(y) + x)

    class TimmAttention(nn.Module):
        def __init__(self, dim=16, heads=4):
            super().__init__()
            self.h, self.scale = heads, (dim // heads) ** -0.5
            self.qkv, self.proj = nn.Linear(dim, dim * 3, bias=False), nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            q = q * self.scale
            attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class Norms(nn.Module):
        """F.layer_norm then * w + b, and an RMSNorm written out."""

        def __init__(self):
            super().__init__()
            self.w, self.b = nn.Parameter(torch.rand(16) + 0.5), nn.Parameter(torch.randn(16))
            self.g = nn.Parameter(torch.rand(16) + 0.5)
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            y = F.layer_norm(x, (16,)) * self.w + self.b
            y = self.fc(y)
            r = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g
            return r

    class Spatial(nn.Module):
        """Manual pixel (un)shuffle, einsum, type_as, maxpool with indices, expand no-op."""

        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(8, 8, 1)
            self.pool = nn.MaxPool2d(2, return_indices=True)

        def forward(self, x):
            b, c, h, w = x.shape
            y = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, c * 4, h // 2, w // 2)
            y = self.c(y[:, :8])
            p, _ = self.pool(y)
            z = torch.einsum("bchw->bhwc", p).type_as(x)
            z = z.expand(b, h // 4, w // 4, 8)
            return z.to(x.dtype)

    class Focus(nn.Module):
        """YOLOv5 Focus: strided slices cat, conv, SiLU; upsample nearest x2 and cat."""

        def __init__(self):
            super().__init__()
            self.c, self.bn = nn.Conv2d(12, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(16, 4, 1)

        def forward(self, x):
            y = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
            y = F.silu(self.bn(self.c(y)))
            u = F.interpolate(y, scale_factor=2.0, mode="nearest")
            return self.c2(torch.cat([u, F.max_pool2d(u, 3, 1, 1)], 1))

    class PS(nn.Module):
        """Depth-to-space written out."""

        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 12, 1)

        def forward(self, x):
            y = self.c(x)
            b, c, h, w = y.shape
            y = y.view(b, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c // 4, h * 2, w * 2)
            return y

    class RMS2(nn.Module):
        """Two RMSNorms in one expression."""

        def __init__(self):
            super().__init__()
            self.g = nn.Parameter(torch.rand(16) + 0.5)

        def forward(self, x):
            a = x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-5)
            b = self.g * (x * torch.rsqrt(x.pow(2).mean(dim=2, keepdim=True) + 1e-6))
            return a + b

    class LinearBN3D(nn.Module):
        """nn.Linear on the last dim of (N, 4, 4), then BatchNorm1d over dim 1: the BN's
        channels are not the Linear's outputs, so it must not fold (pnnx's optlevel 2 folds it)."""

        def __init__(self):
            super().__init__()
            self.fc, self.bn = nn.Linear(4, 4), nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(self.fc(x))

    class SharedOutputs(nn.Module):
        """A conv read by its BN and by others (no fold); a pad read by two convs and a pool."""

        def __init__(self):
            super().__init__()
            self.c, self.bn, self.c2 = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Conv2d(3, 4, 3)

        def forward(self, x):
            p = F.pad(x, (1, 1, 1, 1))
            y = self.c(p)
            return self.bn(y) + y + self.c2(p) + F.avg_pool2d(p, 3, 1).sum(1, keepdim=True)

    class TwoInputs(nn.Module):
        """Two inputs, two outputs; one conv applied to both and twice to one (CSE only there)."""

        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 3, 1)

        def forward(self, a, b):
            u, v, w = self.c(a) * 1.0 + 0.0, self.c(a), self.c(b)
            return u + v, torch.relu(w) * torch.relu(w)

    torch.backends.mha.set_fastpath_enabled(False)  # the fast path fails pnnx's trace check
    torch.manual_seed(0)
    cases = {
        "mobilenetv2": (MobileNetV2(), torch.randn(1, 3, 16, 16)),
        "size_arith": (ShapeArith(), torch.randn(1, 2, 3, 6)),
        "bn_after": (BNAfter(), torch.randn(1, 4, 5)),
        "pads": (Pads(), torch.randn(1, 3, 12, 12)),
        "noops": (NoOps(), torch.randn(1, 4, 4, 4)),
        "chain": (Chain(), torch.randn(1, 3, 4, 4)),
        "sdpa": (SDPA(), torch.randn(1, 5, 16)),
        "se_block": (SEBlock(), torch.randn(1, 8, 6, 6)),
        "timm_attention": (TimmAttention(), torch.randn(1, 5, 16)),
        "norms": (Norms(), torch.randn(1, 4, 16)),
        "spatial": (Spatial(), torch.randn(1, 2, 8, 8)),
        "focus": (Focus(), torch.randn(1, 3, 8, 8)),
        "pixel_shuffle": (PS(), torch.randn(1, 3, 4, 4)),
        "rms_variants": (RMS2(), torch.randn(1, 4, 16)),
        "linear_bn_3d": (LinearBN3D(), torch.randn(2, 4, 4)),
        "shared_outputs": (SharedOutputs(), torch.randn(1, 3, 6, 6)),
        "two_in_two_out": (TwoInputs(), [torch.randn(1, 3, 4, 4), torch.randn(1, 3, 4, 4)]),
    }
    with torch.no_grad():  # BN statistics and affine weights that make folding matter
        for module, _ in cases.values():
            for m in module.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)
    return cases
