"""Shaped like torch.utils.data: the Loader's order as a DistributedSampler
(EpochSampler), and what a DataLoader's caller may pass that a Loader does
otherwise."""
from . import _imagepack


# What a caller used to torch.utils.data.DataLoader may pass or read that a
# Loader does differently: the error says what to use instead.
_DATALOADER_ONLY = {
    "num_workers": "a Loader decodes on threads of this process, not worker processes: threads=N (0: this "
                   "process's cores)",
    "collate_fn": "a Loader's batches are made in C++ (images, labels) or a dict with fields: batch_transform=f "
                  "takes each batch as made (f(images, labels); the reference's mixup/cutmix: its RandomChoice)",
    "sampler": "a Loader's order is its own: shuffle=, seed=, rank=/world_size= (loader.sampler.set_epoch works)",
    "batch_sampler": "a Loader's order is its own: batch_size=, drop_last=, shuffle=, seed=",
    "worker_init_fn": "a Loader has no worker processes to initialise",
    "prefetch_factor": "prefetch=N: batches the loader makes ahead",
    "persistent_workers": "a Loader keeps its threads and open databases across epochs already",
    "timeout": "a Loader has no worker processes to wait for",
    "generator": "a Loader's random choices are functions of seed=, the epoch and the position (set_epoch)",
    "multiprocessing_context": "a Loader has no worker processes",
    "pin_memory_device": "pin_memory=True pins for the current CUDA device",
}


class EpochSampler:
    """loader.sampler: the Loader's order, shaped like DistributedSampler.
    set_epoch(e) sets the loader's next epoch (loader.set_epoch); len() is
    this rank's samples per epoch; iterating gives this rank's dataset
    indices of the next epoch (random or sequential order; a mix or block
    order reads its own way: iterate the loader). rank, num_replicas,
    shuffle, seed, drop_last and epoch as DistributedSampler names them."""

    def __init__(self, loader):
        self._loader = loader

    def set_epoch(self, epoch):
        self._loader.set_epoch(epoch)

    @property
    def epoch(self):
        """The epoch the loader's next iteration runs."""
        return self._loader._upcoming()

    @property
    def rank(self):
        return self._loader.rank

    @property
    def num_replicas(self):
        return self._loader.world_size

    @property
    def shuffle(self):
        return self._loader._options["shuffle"]

    @property
    def seed(self):
        return self._loader._options["seed"]

    @property
    def drop_last(self):
        """False: the order drops no sample (training pads the ranks to equal
        counts, as DistributedSampler(drop_last=False) does); loader.drop_last
        is the DataLoader's, a short final batch."""
        return False

    def __len__(self):
        return self._loader.samples_per_epoch

    def __iter__(self):
        loader = self._loader
        if loader._mix or loader.order not in ("random", "sequential"):
            raise TypeError("this loader reads in %s order%s, which the sampler does not list: iterate the loader "
                            "itself (dict batches carry each sample's \"index\")" % (
                                loader.order, " from a mix" if loader._mix else ""))
        return iter(_imagepack.epoch_indices(loader.dataset_size, loader.order == "random", loader._options["seed"],
                                             loader._upcoming(), loader.rank, loader.world_size, loader._even))

    def __repr__(self):
        return "imagepack.EpochSampler(epoch %d, rank %d of %d)" % (self.epoch, self.rank, self.num_replicas)
