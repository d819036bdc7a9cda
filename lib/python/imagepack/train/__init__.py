"""Train a model from imagepack databases with PyTorch: a recipe to copy.

    python3 -m imagepack.train --data train.lmdb --val val.lmdb --arch resnet50 --output runs/r50
    scripts/launch.sh --nproc 2 -- scripts/train_imagepack.py \\
        --data train.lmdb --val val.lmdb --arch resnet50 --epochs 90 --batch-size 64 --output runs/r50

(scripts/train_imagepack.py runs this package's main: the same program.)

One process per rank (scripts/launch.sh, torchrun or srun set the
variables: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or Slurm's);
DistributedDataParallel over Gloo on CPU, NCCL on CUDA. Input:
imagepack.Loader, decoding and augmenting in C++ threads (no DataLoader
worker processes); uint8 batches are normalised on the device.

The C++ trainer's recipe and options (build/trainer/train, docs/TRAINING.md),
so the two can be compared: SGD with momentum (--nesterov), step, cosine or
onecycle schedules with linear warm-up, --lr-scale-batch, --label-smoothing,
--no-bn-wd, --zero-init-residual; --amp (bf16 autocast on a CPU with native
bf16, fp32 with a notice on others; fp16 with a GradScaler on CUDA).

The data contract is the C++ trainer's: the classes, channels and
normalisation come from --data; the validation set's classes are matched to
them by name or refused naming the first that differs; with no statistics in
the training data the input is normalised with 0.5 / 0.25, and the log says
which.

Checkpoints (OUTPUT/checkpoint.pt, written atomically at each epoch's end,
every --checkpoint-every steps, on SIGTERM/SIGUSR1, which then exit 75, and
on Ctrl-C, which then exits 130 saying where the checkpoint is; a second
signal stops at once, leaving the last complete checkpoint) describe
themselves: --resume auto (or a path) continues mid-epoch with exactly the
uninterrupted run's batches and needs no option repeated; an option given
again with another value is used and said, except --arch and --task
(refused). --evaluate --resume CKPT --val DB needs nothing else; its row
goes to evaluations.jsonl (in --output, else beside the checkpoint).

Nothing is overwritten without being asked: a new run into an --output that
holds one is refused (exit 2) naming --resume auto (continue it) and
--overwrite (start it again, removing its files). Every option is checked
before any work or output: exit 2 for a usage error, 1 for an environment
that cannot serve (a missing database, an --output that cannot be written),
in one line each.

Recipes (docs/TRAINING.md, "Recipes"): --data given several times mixes
datasets (--weights 0.7,0.3, or --repeat / --choose per dataset; a comma
inside one --data still names shards of one dataset); --res-schedule
MIN,MAX,START_RAMP,END_RAMP is FFCV's progressive resolution, --val-size and
--val-resize evaluate at a size of their own (FixRes), --schedule triangular
is FFCV's lr, --blurpool blurs before the ResNets' strided convolutions.
Each epoch's row in metrics.jsonl holds its resolution (res) and each
source's samples (sources).

torchvision's reference flags (references/classification/train.py, as the
C++ trainer takes them; recipe.py): --auto-augment,
--ra-magnitude, --augmix-severity, --random-erase, --interpolation (the
Loader's augmentations), --mixup-alpha / --cutmix-alpha, --model-ema (its
accuracy beside the model's), --lr-warmup-epochs / -method / -decay (the
per-epoch SequentialLR), --norm-weight-decay, --clip-grad-norm,
--train-crop-size / --val-resize-size / --val-crop-size (--size /
--val-resize / --val-size), --tta-flip. --recipe NAME|FILE reads flags
from trainer/recipes/NAME.flags or FILE, one per line; the command line's
win.

--arch: any torchvision.models name (resnet18, resnet50, ...) or small_cnn
(the C++ trainer's small network, for 28-px images such as Fashion-MNIST).
Small images (small_cnn, or --size <= 64) use pad-and-crop augmentation,
larger ones RandomResizedCrop + flip and the resize + centre-crop eval.
--task segmentation (a mask field) and --task restoration (a target image
field) train the C++ trainer's dense models (dense_models.py:
fcn_small, unet_small) on the loader's dict batches, reporting mIoU / PSNR.

The files, by subject: cli.py (the command line, --resume's options),
checks.py (the checks before any work), models.py and dense_models.py,
tasks.py (classification, segmentation, restoration), recipe.py
(torchvision's reference flags, --recipe files), data.py (the data's
contract, the Loaders), process.py (the process group, threads, the
process's end), checkpoint.py (atomic saves, the continue command),
loop.py (the epochs, evaluation, signals), run.py (main: the steps).
"""


def main(argv=None):
    """The trainer on argv (sys.argv[1:] when None): its exit code."""
    from .run import main as run_main
    return run_main(argv)
