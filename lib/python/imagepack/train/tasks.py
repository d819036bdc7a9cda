"""The tasks imagepack.train trains (--task): each takes the loader's
batches to a model's input and target, and names its loss and figures
(the C++ trainer's, trainer/task.cc): classification's Acc@1/Acc@5,
segmentation's mIoU, restoration's PSNR."""
import sys

import torch
import torch.nn.functional as F

import imagepack

from . import dense_models


class Classification:
    default_arch = "resnet18"

    def __init__(self, meta, args, normalise):
        self.classes = list(meta["classes"])
        if not self.classes:
            sys.exit("train_imagepack: classification needs training data with classes")
        self.outputs, self.normalise, self.smoothing = len(self.classes), normalise, args.label_smoothing

    def match_eval(self, val):  # the Loader maps the labels (classes=); nothing more to do
        return ""

    def prepare(self, batch, device, eval_batch=False):
        # Records with fields beside the label (a Hub file's caption column)
        # come as a dict; classification reads the image and the label.
        images, labels = (batch["image"], batch["label"]) if isinstance(batch, dict) else batch
        return self.normalise(images), labels.to(device, non_blocking=True)

    def loss(self, out, y, training=True):
        return F.cross_entropy(out, y, label_smoothing=self.smoothing if training else 0.0)

    def tally(self, out, x, y):
        top = out.topk(min(5, out.size(1)), 1).indices
        hit = top.eq(y.view(-1, 1))
        return torch.tensor([hit[:, :1].sum().item(), hit.sum().item(), len(y)], dtype=torch.float64)

    def figures(self, t):
        return {"acc1": 100 * t[0].item() / t[2].item(), "acc5": 100 * t[1].item() / t[2].item()}

    def line(self, f):
        return "Acc@1 %.3f  Acc@5 %.3f" % (f["acc1"], f["acc5"])

    def score(self, f):
        return f["acc1"]

    def result(self, f):
        return "test accuracy %.2f%%" % f["acc1"]

    def step_figures(self, out, x, y):  # a logged step's row (the C++ trainer's keys)
        t = self.tally(out.detach(), x, y)
        return {"error1": 100 - 100 * t[0].item() / t[2].item(), "error5": 100 - 100 * t[1].item() / t[2].item()}


class Segmentation:
    default_arch = "fcn_small"

    def __init__(self, meta, args, normalise):
        field = next((f for f in meta.get("fields", []) if f["kind"] == "mask"), None)
        if field is None:
            sys.exit("train_imagepack: --task segmentation needs training data with a mask field")
        self.field, self.eval_field = field["name"], field["name"]
        self.names, self.ignore = list(field["classes"]), field.get("ignore", -1)
        self.outputs, self.normalise, self.lut = len(self.names), normalise, None

    def match_eval(self, val):
        """The validation mask's classes matched to the training data's by
        name; its values then mapped (values of no training class ignored)."""
        field = next((f for f in val.fields if f["kind"] == "mask"), None)
        if field is None:
            sys.exit("train_imagepack: %s has no mask field; the training data has '%s'" % (
                ",".join(val._paths), self.field))
        m = imagepack.match_classes(self.names, field["classes"], what="mask classes")
        self.eval_field = field["name"]
        if not m.identity or field.get("ignore", -1) != self.ignore:
            fill = self.ignore if self.ignore >= 0 else -100
            lut = torch.full((65536 if field.get("dtype") == "uint16" else 256,), fill, dtype=torch.long)
            lut[:len(m.to_train)] = torch.tensor(m.to_train, dtype=torch.long)
            self.lut = lut
        return "mask '%s': %s" % (field["name"], m)

    def prepare(self, b, device, eval_batch=False):
        y = b[self.eval_field if eval_batch else self.field].long()
        if eval_batch and self.lut is not None:
            y = self.lut[y]
        return self.normalise(b["image"]), y.to(device)

    def loss(self, out, y, training=True):
        return F.cross_entropy(out, y, ignore_index=self.ignore if self.ignore >= 0 else -100)

    def tally(self, out, x, y):
        c = dense_models.Confusion(self.outputs)
        c.add(out, y)
        return c.m

    def figures(self, t):
        c = dense_models.Confusion(self.outputs)
        c.m = t
        return c.figures()

    def line(self, f):
        return "mIoU %.3f  PixAcc %.3f" % (f["miou"], f["pixel_acc"])

    def score(self, f):
        return f["miou"]

    def result(self, f):
        return "test mIoU %.2f%%" % f["miou"]

    def step_figures(self, out, x, y):
        return {}


class Restoration:
    default_arch = "unet_small"

    def __init__(self, meta, args, normalise):
        field = next((f for f in meta.get("fields", []) if f["kind"] == "image"), None)
        if field is None:
            sys.exit("train_imagepack: --task restoration needs training data with a target image field")
        self.field = self.eval_field = field["name"]
        self.outputs = None  # the input's channels

    def match_eval(self, val):
        field = next((f for f in val.fields if f["kind"] == "image"), None)
        if field is None:
            sys.exit("train_imagepack: %s has no target image field" % ",".join(val._paths))
        self.eval_field = field["name"]
        return "target image '%s'" % field["name"]

    def prepare(self, b, device, eval_batch=False):
        def scaled(t):
            return t.to(device).float().div_(127.5).sub_(1)
        return scaled(b["image"]), scaled(b[self.eval_field if eval_batch else self.field])

    def loss(self, out, y, training=True):
        return F.l1_loss(out, y)

    def tally(self, out, x, y):
        return torch.tensor([dense_models.psnr_sum(out, y), dense_models.psnr_sum(x, y), len(x)],
                            dtype=torch.float64)

    def figures(self, t):
        psnr, psnr_in = t[0].item() / t[2].item(), t[1].item() / t[2].item()
        return {"psnr": psnr, "psnr_input": psnr_in, "psnr_gain": psnr - psnr_in}

    def line(self, f):
        return "PSNR %.3f  Input %.3f  Gain %.3f" % (f["psnr"], f["psnr_input"], f["psnr_gain"])

    def score(self, f):
        return f["psnr"]

    def result(self, f):
        return "test PSNR %.2f dB (input %.2f dB, gain %+.2f dB)" % (f["psnr"], f["psnr_input"], f["psnr_gain"])

    def step_figures(self, out, x, y):
        t = self.tally(out.detach(), x, y)
        return {"psnr": t[0].item() / t[2].item(), "psnr_gain": (t[0].item() - t[1].item()) / t[2].item()}


TASKS = {"classification": Classification, "segmentation": Segmentation, "restoration": Restoration}
