"""The models imagepack.train builds: the C++ trainer's small_cnn and dense
models (dense_models.py), any torchvision classification model, and
FFCV's BlurPool for the ResNets."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import dense_models

# The models defined here, by the tasks they serve; --arch may also be any
# torchvision classification model.
OWN_MODELS = {"small_cnn": ("classification",), "fcn_small": ("segmentation", "restoration"),
              "unet_small": ("segmentation", "restoration")}


def torchvision_models():
    import torchvision
    try:
        return set(torchvision.models.list_models(module=torchvision.models))
    except AttributeError:  # torchvision before 0.14: its public builders
        return {n for n in dir(torchvision.models) if n[0].islower() and callable(getattr(torchvision.models, n))}


def small_cnn(in_channels, num_classes):
    """The C++ trainer's small_cnn (trainer/models.cc), layer for layer."""
    def block(i, o):
        return [nn.Conv2d(i, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]
    return nn.Sequential(*block(in_channels, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2),
                         *block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_classes))


class Blur(nn.Module):
    """BlurPool's fixed low-pass, [1 2 1]^T [1 2 1] / 16 per channel, stride 1."""

    def __init__(self, channels):
        super().__init__()
        k = torch.tensor([1.0, 2.0, 1.0])
        self.register_buffer("blur", (k.view(3, 1) * k.view(1, 3) / 16).expand(channels, 1, 3, 3).contiguous())
        self.channels = channels

    def forward(self, x):
        return F.conv2d(x, self.blur.to(x.dtype), padding=1, groups=self.channels)


def add_blurpool(module):
    """Each strided convolution of at least 16 input channels blurred first (FFCV's rule)."""
    for name, child in module.named_children():
        if isinstance(child, nn.Conv2d) and max(child.stride) > 1 and child.in_channels >= 16:
            setattr(module, name, nn.Sequential(Blur(child.in_channels), child))
        else:
            add_blurpool(child)


def make_model(arch, in_channels, outputs, zero_init_residual, blurpool=False):
    if arch == "small_cnn":
        return small_cnn(in_channels, outputs)
    if arch == "fcn_small":
        return dense_models.fcn_small(in_channels, outputs)
    if arch == "unet_small":
        return dense_models.unet_small(in_channels, outputs)
    import torchvision
    kwargs = {"zero_init_residual": True} if zero_init_residual and arch.startswith(("resnet", "resnext", "wide")) else {}
    model = getattr(torchvision.models, arch)(num_classes=outputs, **kwargs)
    if in_channels != 3:  # gray input: the first convolution takes 1 channel
        conv = model.conv1
        model.conv1 = nn.Conv2d(in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                                bias=conv.bias is not None)
    if blurpool:
        add_blurpool(model)
    return model
