"""imagepack.Loader: batches from the C++ loader, shaped like a DataLoader."""
import os
import sys

import numpy as np

from . import _imagepack
from . import options
from .classes import _classes_and_name
from .common import _parse_meta, _paths, _torch
from .dataset import Dataset, _Concat
from .mix import _is_mix, _sources
from .output import configure
from .ranks import _cores, _env_int, distributed_env
from .sampler import _DATALOADER_ONLY, EpochSampler
from .schedule import _schedule, resolution

# The loader's transforms, name -> trains (random crop and flips), from the
# library's one table (TransformName in loader.h): never spelled here.
_TRANSFORMS = dict(_imagepack.transforms())
TRANSFORMS = tuple(_TRANSFORMS)
# Loader's keyword options that go to the C++ LoaderOptions as they are
# (the others are set from the arguments: paths, batch_size, size,
# transform, scale, ratio, shuffle, rank, world_size, even_partition,
# cache_dir): the option table's rows for the Loader (options.py).
_LOADER_OPTIONS = options.loader_keywords()


class Loader:
    """Batches of augmented uint8 images from imagepack databases.

    paths: one database or the shards of one dataset (a path or a list).
    batch_size, size: samples per batch; output height and width.
    train: RandomResizedCrop(size, scale, ratio) + horizontal flip, shuffled,
        every rank the same number of samples (DistributedSampler's rule);
        False: resize the shorter edge to eval_resize (size / 0.875 when 0),
        centre crop, in order, every sample exactly once across ranks.
    transform: overrides train's choice, one of imagepack.TRANSFORMS:
        "train", "eval", "pad_crop" (pad by `pad`, random crop, flip:
        CIFAR-style) or "pad_crop_eval".
    channels: 0 (the dataset's), 1 or 3. layout: "NCHW" or "NHWC".
    seed: the order and every augmentation are functions of (seed, epoch,
        rank, world_size, position), so runs repeat exactly.
    rank, world_size: from torch.distributed when it is initialised,
        else from torchrun's RANK and WORLD_SIZE (or Slurm's SLURM_PROCID
        and SLURM_NTASKS), else 0 and 1 (distributed_env()); a sharded
        loader says where they came from in one line on stderr (rank 0).
    threads: decode threads (0: the cores this process may use divided by
        the ranks on this machine, LOCAL_WORLD_SIZE, as the C++ trainer
        counts them). prefetch: batches made ahead.
    classes: the class list labels are handed out in: a list of names, or
        the training Loader / Dataset (for a validation loader). The
        dataset's labels are matched to it by name (match_classes); a
        class it lacks is a ValueError naming it. None: the dataset's own.
    Mixing datasets (docs/PYTHON.md, "Mixing datasets"): paths a list of
        datasets, each a path or a list of shards, with weights=[0.7,
        0.3] (relative shares of each epoch of epoch_size samples, default
        every record once on average), or repeat=[3, 1] / choose=[5000,
        None] (absolute per dataset; None or absent: once). Exact counts
        per epoch, a small dataset repeated rather than dropped, one order
        for every world size, exact and elastic resume; the datasets share
        their class list, or classes= names it and each is matched to it.
    size_schedule: (min, max, start_ramp, end_ramp[, step]) or its text
        "160,192,11,13": each epoch's output size (resolution()); size
        may then be None. set_output_size(n) sets the next epochs' size by
        hand. The loader keeps its threads and open databases.
    on_corrupt: "fail" (raise CorruptionError naming the record) or "skip"
        (take the next readable record; counted in stats()["skipped"]).
    vflip: training transforms also flip vertically (probability 1/2), the
        same way for every spatial field of a sample.
    min_box_visible: a box whose part inside the crop is below this
        fraction of its area is dropped (empty ones always are).
    in_ram: hold the database in RAM, one copy per machine (shared memory,
        mapped by every process that opens it); lock_in_ram: mlock it.
    paths may be s3://BUCKET/KEY blobs (docs/OBJECT_STORAGE.md); cache_dir:
        keep fetched blocks on local disk there (shared by the processes
        of this user on the machine, kept across runs), at most
        cache_limit_mb (0: $IMAGEPACK_CACHE_LIMIT_MB, else 20480).
    order: "random" (a full permutation per epoch), "blocks" (blocks of
        block_mb in random order, records shuffled within window_blocks
        blocks: large sequential reads for data not in the page cache) or
        "auto" (random when in RAM, small, cached or not packed with
        --shuffle; blocks otherwise).
        io_threads: reads in flight ahead of decoding (-1: 4 with blocks).
    as_torch: hand out torch tensors (torch.from_numpy: no copy) when torch
        is importable; False: numpy arrays.
    dtype: the images' type: "uint8" (the pixels; the default), "float32",
        "float16" or "bfloat16" (names, torch or numpy dtypes): x / 255, then
        (x - mean) / std per channel, as torchvision's ToTensor + Normalize
        compute it, made by the decode threads. mean=/std= given make the
        default float32. bfloat16 needs torch.
    mean, std: per channel on [0, 1] (a number or one per channel):
        "imagenet" (IMAGENET_MEAN / IMAGENET_STD, torchvision's, for
        pretrained weights), "dataset" (the statistics pack_lmdb stored), or
        None (0 and 1). std=None after a named mean takes the same name.
    memory_format: "channels_last" (or torch.channels_last): images of shape
        [B, C, H, W] laid out as [B, H, W, C] in memory, made so by the
        threads (no copy); the default is contiguous NCHW.
    pin_memory: batches in page-locked memory, allocated with CUDA's
        cudaHostAlloc by the loader, where torch sees a CUDA device; ignored
        (with a warning) without one.
    batch_transform: f(images, labels) (a dict batch: f(batch)) applied to
        each batch as it is handed out, its result what iteration gives
        (the reference recipe's mixup / cutmix: docs/PYTHON.md).
    scale, ratio: RandomResizedCrop's ranges (torchvision's defaults,
        (0.08, 1) and (3/4, 4/3)). shuffle: the training order (default:
        train). cache_dir: see "paths may be" below.
    Shaped like torch.utils.data.DataLoader where a training script reads
        one: dataset, batch_size, drop_last, sampler (set_epoch), len(),
        pin_memory, num_workers (0: no worker processes); iterating again
        without set_epoch starts the next epoch. DataLoader keywords it
        does differently (num_workers=, collate_fn=, sampler=, ...) are a
        TypeError saying what to use instead.
    The defaults of the options above are the C++ LoaderOptions' own:
        Loader.options_defaults() lists them. Every keyword option, from
        the option table (imagepack.options), with its default:
<the table's rows>

    A batch handed out is the caller's until it is dropped: its memory is
    one of the loader's batch buffers, which goes back to the loader only
    when the last array or tensor over it is gone. Keeping batches is safe
    (the loader allocates more buffers); copying is never needed.
    """

    def __init__(self, paths, batch_size, size, train=True, *, transform=None, scale=None, ratio=None,
                 shuffle=None, rank=None, world_size=None, cache_dir=None, as_torch=True, classes=None,
                 weights=None, repeat=None, choose=None, epoch_size=None, size_schedule=None, dtype=None, mean=None,
                 std=None, memory_format=None, pin_memory=False, batch_transform=None, **options):
        if transform is None:
            transform = "train" if train else "eval"
        if transform not in _TRANSFORMS:
            raise ValueError("transform must be one of %s, not %r" % (", ".join(_TRANSFORMS), transform))
        if batch_transform is not None and not callable(batch_transform):
            raise TypeError("batch_transform must be callable: f(images, labels) -> what each iteration gives "
                            "(a dict batch: f(batch))")
        self._batch_transform = batch_transform
        self._schedule = _schedule(size_schedule) if size_schedule is not None else None
        if size is None and self._schedule is not None:
            size = self._schedule[1]  # the largest: batch buffers are checked for it
        if size is None or int(batch_size) < 1 or int(size) < 1:
            raise ValueError("batch_size and size must be positive (got %r, %r)" % (batch_size, size))
        training = _TRANSFORMS[transform]
        r, w, local, source = distributed_env()
        if rank is None or world_size is None:
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        else:
            source, local = "arguments", _env_int("LOCAL_WORLD_SIZE") or int(world_size)
        if int(options.get("threads", 0)) == 0:
            options["threads"] = max(1, _cores() // max(1, local))
        self._shuffle = training if shuffle is None else bool(shuffle)
        # Every other option is a field of the C++ LoaderOptions, which holds
        # the defaults (Loader.options_defaults() lists them).
        o = _imagepack.LoaderOptions()
        self._erase_value_default = "random_erase_value" not in options
        for name, value in options.items():
            if name in _DATALOADER_ONLY:
                raise TypeError("Loader() got an unexpected keyword argument %r (a DataLoader's): %s"
                                % (name, _DATALOADER_ONLY[name]))
            if name not in _LOADER_OPTIONS:
                raise TypeError("Loader() got an unexpected keyword argument %r" % name)
            setattr(o, name, type(getattr(o, name))(value))
        if _is_mix(paths, weights, repeat, choose):
            datasets, o.sources = _sources(paths, weights, repeat, choose)
            self._paths = [p for d in datasets for p in d]
            self._name = " + ".join(",".join(d) for d in datasets)
            if epoch_size is not None:
                o.epoch_size = int(epoch_size)
        else:
            if epoch_size is not None:
                raise ValueError("epoch_size applies to a mix of datasets (weights=)")
            self._paths = _paths(paths)
            self._name = ",".join(self._paths)
            o.paths = self._paths
        o.batch_size, o.size, o.transform = int(batch_size), int(size), transform
        o.rank, o.world_size, o.shuffle, o.even_partition = int(rank), int(world_size), self._shuffle, training
        if scale is not None:
            o.scale_min, o.scale_max = float(scale[0]), float(scale[1])
        if ratio is not None:
            o.ratio_min, o.ratio_max = float(ratio[0]), float(ratio[1])
        o.cache_dir = os.fspath(cache_dir) if cache_dir else ""
        self._mix = bool(o.sources)
        configure(self, o, dtype, mean, std, memory_format, pin_memory, as_torch)
        if classes is not None:
            o.classes, o.classes_from = _classes_and_name(classes)
        self._options = dict(batch_size=o.batch_size, size=o.size, transform=transform, seed=o.seed, rank=o.rank,
                             world_size=o.world_size, shuffle=self._shuffle, vflip=o.vflip)
        self._drop_last, self._even = bool(o.drop_last), bool(o.even_partition)
        self._torch = _torch() if as_torch else None
        o.wide_maps_int32 = self._torch is not None  # torch has no uint16: the workers widen
        self._loader = _imagepack.Loader(o)
        self._threads = o.threads
        if int(world_size) > 1 and int(rank) == 0:
            print("imagepack.Loader: %s: rank %d of %d (from %s), %d decode threads" % (
                self._name, int(rank), int(world_size), source, o.threads), file=sys.stderr)
        self._has_fields = bool(self.meta.get("fields"))
        self._epoch = 0  # the epoch of the iteration in progress (or last run); before any, the next one's
        self._next = 0   # the epoch the next iteration starts (set_epoch, else the last one's + 1)
        self._remaining = None  # batches left of the iteration in progress (0: it is complete)
        self._explicit = None   # the epoch set_epoch named since the last iteration began
        # (epoch, position, order, world, block, window, size, mix): where the next iteration continues
        self._resume = None
        self._started = False

    @staticmethod
    def options_defaults():
        """The keyword options' defaults, as the C++ LoaderOptions holds them."""
        o = _imagepack.LoaderOptions()
        d = {name: getattr(o, name) for name in _LOADER_OPTIONS}
        d.update(scale=(o.scale_min, o.scale_max), ratio=(o.ratio_min, o.ratio_max))
        return d

    def set_epoch(self, epoch):
        """The epoch the next iteration runs (as DistributedSampler.set_epoch);
        without it, each iteration runs the epoch after the last one's (the
        first: 0), as a DataLoader over a RandomSampler reshuffles by itself.
        After load_state_dict(), setting the state's own epoch keeps the
        position it restored (the loop `for epoch in range(start, E):
        loader.set_epoch(epoch)` resumes exactly); another epoch while a
        restored position is pending is a ValueError naming both."""
        epoch = int(epoch)
        if self._resume is not None:
            if epoch == self._resume[0]:
                return
            if self._resume[1] > 0:
                raise ValueError(
                    "set_epoch(%d) after load_state_dict() restored epoch %d at position %d: the next iteration "
                    "would drop that position. Start the loop at the state's epoch (state['epoch']), or build a "
                    "new Loader to start afresh" % (epoch, self._resume[0], self._resume[1]))
        self._next = self._explicit = epoch
        self._resume = None

    @property
    def epoch(self):
        """The epoch of the iteration in progress (or of the last one);
        before the first, the one it will run."""
        return self._epoch

    def _upcoming(self):
        """The epoch the next iteration runs (a restored one, set_epoch's, or the last one's + 1)."""
        return self._resume[0] if self._resume is not None else self._next

    def __len__(self):
        """Batches per epoch for this rank: of the epoch in progress, else of
        the one the next iteration runs (the rest of the epoch, right after
        load_state_dict)."""
        if self._counts_rest():
            return self._loader.batches_per_epoch
        s = self._whole_epoch_samples()
        b = self._options["batch_size"]
        return s // b if self._drop_last else -(-s // b)

    def _counts_rest(self):
        """Whether the C++ counts (from the restored position) are the ones
        asked for: a restored epoch pending or in progress."""
        return self._resume is not None or bool(self._started and self._remaining)

    def _whole_epoch_samples(self):
        """This rank's samples in an epoch from its start (the C++ loader's rule)."""
        n, w, r = self.epoch_length, self.world_size, self.rank
        return -(-n // w) if self._even else max(0, -(-(n - r) // w))

    def set_output_size(self, size):
        """The output size (height and width) of the epochs started from the
        next iteration on; the epoch in progress keeps its own. The loader
        keeps its threads, open databases and batch buffers. Progressive
        resolution by hand (or size_schedule= for FFCV's schedule)."""
        if self._schedule is not None:
            raise ValueError("this loader follows size_schedule=%s: its sizes come from the schedule" %
                             ",".join(str(v) for v in self._schedule))
        self._loader.set_output_size(int(size))

    @property
    def output_size(self):
        """The current epoch's output size (before the first iteration, the next one's)."""
        return self._loader.output_size

    def __iter__(self):
        if self._resume is not None:
            # load_state_dict() restored this position, and its batches are
            # being made since: restoring again would throw them away.
            epoch, self._resume = self._resume[0], None
        else:
            epoch = self._next
            if self._schedule is not None:
                self._loader.set_output_size(resolution(epoch, *self._schedule))
            self._loader.start_epoch(epoch)
        self._epoch, self._next, self._explicit = epoch, epoch + 1, None
        self._started = True
        self._remaining = self._loader.batches_per_epoch
        while True:
            batch = self._loader.next()
            if batch is None:
                return
            self._remaining -= 1
            images, labels, indices, fields = batch
            if not self._has_fields:
                out = self._images(images), self._torch.from_numpy(labels) if self._torch is not None else labels
                yield self._batch_transform(*out) if self._batch_transform is not None else out
                continue
            out = self._dict_batch(images, labels, indices, fields)
            yield self._batch_transform(out) if self._batch_transform is not None else out

    def _images(self, images):
        """A batch's images as handed out: a tensor (bfloat16 from its bits), channels_last a permuted view."""
        if self._torch is not None:
            if self._dtype == "bfloat16":
                images = self._torch.from_numpy(images.view(np.int16)).view(self._torch.bfloat16)
            else:
                images = self._torch.from_numpy(images)
        elif self._dtype == "bfloat16":
            raise ValueError("bfloat16 batches need torch")  # refused at construction; as_torch cannot change
        return images.permute(0, 3, 1, 2) if self._channels_last and self._torch is not None else (
            images.transpose(0, 3, 1, 2) if self._channels_last else images)

    def _dict_batch(self, images, labels, indices, fields):
        """{"image", "label", "index", fields..., "crop_box"}; text fields as
        lists of str, everything else as arrays (tensors with torch)."""
        out = {"image": None, "label": labels, "index": indices}  # the images last (below), in the first place
        for spec in self.meta["fields"]:
            name = spec["name"]
            if spec["kind"] == "text":
                data, offsets = fields.pop(name), fields.pop(name + "_offsets")
                raw = data.tobytes()
                out[name] = [raw[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(len(offsets) - 1)]
        out.update(fields)
        if self._torch is not None:
            # uint16 maps come as int32 already (wide_maps_int32).
            out = {k: (v if isinstance(v, (list, type(None))) else self._torch.from_numpy(v)) for k, v in out.items()}
        if self._channels_last:  # second images were written NHWC too
            for spec in self.meta["fields"]:
                if spec["kind"] == "image":
                    v = out[spec["name"]]
                    out[spec["name"]] = v.permute(0, 3, 1, 2) if self._torch is not None else v.transpose(0, 3, 1, 2)
        out["image"] = self._images(images)
        return out

    def state_dict(self):
        """Where the loader is: the epoch and how many positions of its order
        the ranks together have consumed (every rank reports the same, as
        ranks take batches in step). load_state_dict() continues there:
        with the same world size and batch size, exactly the batches the
        uninterrupted run would have produced; with another world size, the
        rest of the epoch split over the new ranks (docs/LOADER.md)."""
        if self._resume is not None:
            epoch, position, order, world, block, window, size, mix = self._resume
        elif self._started and self._remaining and self._explicit in (None, self._epoch):
            # an epoch in progress (set_epoch of another epoch since starts that one afresh)
            epoch, position, order, world, block, window, size, mix = self._loader.state
        else:
            # nothing in progress (not started, complete, or set_epoch since): where the next iteration starts
            epoch, position, order, world, block, window, size, mix = (
                self._upcoming(), 0, self.order, 0, 0, 0, self._next_size(), self._loader.state[7])
        state = dict(self._options, size=int(size))
        state.update({"epoch": int(epoch), "position": int(position), "order": order, "order_world": int(world),
                      "order_block_records": int(block), "order_window_blocks": int(window),
                      "dataset": self._loader.identity, "dataset_size": int(self.dataset_size)})
        if mix:
            state["mix"] = mix  # the sources and shares (checked by name on load)
            state["sources"] = self.sources
        return state

    def _next_size(self):
        if self._schedule is not None:
            return resolution(self._upcoming(), *self._schedule)
        return self._loader.output_size

    def load_state_dict(self, state):
        # A mix's position is a place in the order of its sources and shares:
        # another mix is refused naming the source that differs.
        self._loader.check_state(int(state["position"]), state.get("mix", ""))
        # A position is a position in one dataset's order (states saved
        # before identities were kept carry none); a state at an epoch's
        # start names no place in it, and goes on with any data.
        if int(state["position"]) > 0 and "dataset" in state and state["dataset"] != self._loader.identity:
            raise ValueError("state was saved for another dataset (identity %s, %s records), this loader reads "
                             "%s (identity %s, %d records)" % (state["dataset"], state.get("dataset_size", "?"),
                                                              ", ".join(self._paths), self._loader.identity, self.dataset_size))
        # The size is the epoch's own (progressive resolution): restored, not compared.
        for key in ("seed", "transform", "shuffle"):
            if key in state and state[key] != self._options[key]:
                raise ValueError("state was saved with %s=%r, this loader has %r: the rest of the epoch would "
                                 "differ" % (key, state[key], self._options[key]))
        resume = (int(state["epoch"]), int(state["position"]), state.get("order", "auto"),
                  int(state.get("order_world", 0)), int(state.get("order_block_records", 0)),
                  int(state.get("order_window_blocks", 0)), int(state.get("size", 0)), state.get("mix", ""))
        self._loader.restore(*resume)  # len() now counts the rest of the epoch; the next iteration goes on from here
        self._epoch = self._next = resume[0]
        self._resume, self._explicit = resume, None

    def stats(self):
        """Images decoded, bytes read, seconds spent reading, decoding and
        waiting (summed over threads), corrupt records skipped."""
        return self._loader.stats()

    @property
    def meta(self):
        if getattr(self, "_meta", None) is None:
            self._meta = _parse_meta(self._loader.meta_json)
        return self._meta

    def normalisation(self):
        """(mean, std, where) per channel on [0, 1]. A loader made with
        mean=/std= returns those (it applies them already; `where` names
        them: "imagenet", "dataset" or "given"). Otherwise the DATA'S OWN
        statistics, for training from scratch as the trainers do, or 0.5 /
        0.25 when the dataset holds none (packed with --stats-sample 0);
        `where` says which. Never ImageNet's: pretrained weights want
        mean="imagenet" (IMAGENET_MEAN / IMAGENET_STD). Normalise validation
        data with the training loader's."""
        mean, std, how = self._norm
        c = self.channels
        if mean or std:
            spread = lambda v, d: [float(x) for x in (v * c if len(v) == 1 else v)] if v else [d] * c  # noqa: E731
            return spread(mean, 0.0), spread(std, 1.0), "applied by the loader (%s)" % how
        mean, std = self.meta.get("mean") or [], self.meta.get("std") or []
        if len(mean) == c and len(std) == c:
            return list(mean), list(std), "the training data's statistics (not ImageNet's)"
        return [0.5] * c, [0.25] * c, "0.5 / 0.25 (the dataset holds no statistics)"

    # -- shaped like torch.utils.data.DataLoader ------------------------------
    @property
    def dataset(self):
        """The records, indexable: len() is the dataset's records (every
        source's, for a mix: one after the other, the loader's dataset
        indices), items as imagepack.open gives them (the records' own
        labels, not remapped by classes=). Opened on first use."""
        if getattr(self, "_dataset", None) is None:
            if self._mix:
                self._dataset = _Concat([Dataset(s["name"].split(",")) for s in self.sources])
            else:
                self._dataset = Dataset(self._paths)
        return self._dataset

    @property
    def batch_size(self):
        return self._options["batch_size"]

    @property
    def drop_last(self):
        return self._drop_last

    @property
    def sampler(self):
        """A DistributedSampler-shaped view of the order (EpochSampler): its
        set_epoch sets this loader's epoch."""
        return EpochSampler(self)

    @property
    def num_workers(self):
        """0: no worker processes (the decode threads are `threads`)."""
        return 0

    def __getattr__(self, name):
        # only reached for names the Loader lacks
        if name in _DATALOADER_ONLY:
            raise AttributeError("imagepack.Loader has no %r (a DataLoader's): %s" % (name, _DATALOADER_ONLY[name]))
        raise AttributeError("'imagepack.Loader' object has no attribute %r" % name)

    @property
    def fields(self):
        """The dataset's fields beyond image and class (metadata entries)."""
        return self.meta.get("fields", [])

    @property
    def classes(self):
        return self.meta["classes"]

    @property
    def channels(self):
        return self._loader.channels

    @property
    def dataset_size(self):
        return self._loader.dataset_size

    @property
    def threads(self):
        """Decode threads (the `threads` option resolved)."""
        return self._threads

    @property
    def rank(self):
        return self._options["rank"]

    @property
    def world_size(self):
        return self._options["world_size"]

    @property
    def order(self):
        """The order epochs start with: "random", "blocks" or "sequential"
        (order="auto" resolved when the loader opened; docs/LOADER.md)."""
        return self._loader.order

    @property
    def samples_per_epoch(self):
        """This rank's samples: of the epoch in progress, else of the next one (len(), in samples)."""
        return self._loader.samples_per_epoch if self._counts_rest() else self._whole_epoch_samples()

    @property
    def epoch_length(self):
        """Positions in an epoch's order: dataset_size, or a mix's samples per epoch."""
        return self._loader.epoch_length

    @property
    def sources(self):
        """Per dataset: {"name": its paths joined by commas, "records", "samples": per epoch}
        (one entry for one dataset)."""
        return [{"name": n, "records": r, "samples": c} for n, r, c in self._loader.sources]


Loader.__doc__ = Loader.__doc__.replace("<the table's rows>\n", options.loader_doc() + "\n")
