"""The C++ trainer's dense models (trainer/models.cc) in PyTorch, layer for
layer and with the same initialisation, and the figures of its tasks
(trainer/task.cc): so that a Python run and a C++ run of the same recipe
can be compared.

    fcn_small(in_channels, classes)    segmentation
    unet_small(in_channels, channels)  restoration (output = input + residual)
    Confusion(classes)                 mIoU, pixel accuracy, IoU per class
    psnr_sum(out, target)              summed per-image PSNR on [0, 1] of [-1, 1] tensors
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTHS = (16, 32, 64, 128)


def conv_bn_relu(i, o, stride=1):
    return [nn.Conv2d(i, o, 3, stride, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]


class DenseNet(nn.Module):
    def __init__(self, in_channels, outputs, unet):
        super().__init__()
        w = WIDTHS
        self.unet = unet
        self.enc = nn.ModuleList([
            nn.Sequential(*conv_bn_relu(in_channels, w[0]), *conv_bn_relu(w[0], w[0])),
            nn.Sequential(*conv_bn_relu(w[0], w[1], 2), *conv_bn_relu(w[1], w[1])),
            nn.Sequential(*conv_bn_relu(w[1], w[2], 2), *conv_bn_relu(w[2], w[2])),
            nn.Sequential(*conv_bn_relu(w[2], w[3], 2), *conv_bn_relu(w[3], w[3]))])
        self.dec = nn.ModuleList()
        self.skip = nn.ModuleList()
        for k in (2, 1, 0):
            self.dec.append(nn.Sequential(*conv_bn_relu(w[k + 1] + (w[k] if unet else 0), w[k])))
            self.skip.append(nn.Identity() if unet else nn.Conv2d(w[k], w[k], 1, bias=False))
        self.head = nn.Conv2d(w[0], outputs, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if unet:  # start as the identity
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    def forward(self, x):
        feats = []
        y = x
        for stage in self.enc:
            y = stage(y)
            feats.append(y)
        y = feats[3]
        for i, s in enumerate((feats[2], feats[1], feats[0])):
            y = F.interpolate(y, size=s.shape[2:], mode="bilinear", align_corners=False)
            y = self.dec[i](torch.cat([y, s], 1)) if self.unet else self.dec[i](y) + self.skip[i](s)
        out = self.head(y)
        return out + x if self.unet else out


def fcn_small(in_channels, classes):
    return DenseNet(in_channels, classes, unet=False)


def unet_small(in_channels, channels):
    return DenseNet(in_channels, channels, unet=True)


class Confusion:
    """A K x K confusion matrix (target-major) over the pixels whose target
    is a class; the C++ trainer's segmentation figures."""

    def __init__(self, classes):
        self.k = classes
        self.m = torch.zeros(classes * classes, dtype=torch.float64)

    def add(self, logits, target):
        pred = logits.argmax(1).flatten().cpu()
        t = target.flatten().cpu()
        valid = (t >= 0) & (t < self.k)
        self.m += torch.bincount(t[valid] * self.k + pred[valid], minlength=self.k * self.k).double()

    def figures(self):
        m = self.m.view(self.k, self.k)
        tp = m.diag()
        union = m.sum(1) + m.sum(0) - tp
        present = union > 0
        iou = torch.where(present, 100 * tp / union.clamp_min(1), torch.full_like(tp, -1.0))
        miou = iou[present].mean().item() if present.any() else 0.0
        total = m.sum().item()
        return {"miou": miou, "pixel_acc": 100 * tp.sum().item() / total if total else 0.0,
                "iou": iou.tolist()}


def psnr_sum(out, target):
    mse = ((out.clamp(-1, 1) - target) / 2).pow(2).flatten(1).mean(1).clamp_min(1e-10)
    return (-10 * mse.log10()).sum().item()
