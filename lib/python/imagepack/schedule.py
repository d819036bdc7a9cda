"""Progressive resolution: FFCV's schedule, computed by the library."""
from . import _imagepack


def resolution(epoch, min_res, max_res, start_ramp, end_ramp, step=32):
    """FFCV's progressive resolution at `epoch` (ffcv-imagenet's
    get_resolution): min_res while epoch <= start_ramp, max_res from
    end_ramp on, in between the linear interpolation rounded to a multiple
    of `step` (halves to even, as numpy rounds). The C++ trainer's and
    train_imagepack.py's --res-schedule, and Loader(size_schedule=)."""
    return _imagepack.resolution(int(epoch), int(min_res), int(max_res), int(start_ramp), int(end_ramp), int(step))


def _schedule(schedule):
    """(min, max, start_ramp, end_ramp, step) from a tuple or "MIN,MAX,START,END[,STEP]"."""
    if isinstance(schedule, str):
        return _imagepack.parse_resolution_schedule(schedule)
    values = [int(v) for v in schedule]
    if len(values) == 4:
        values.append(32)
    text = ",".join(str(v) for v in values)
    return _imagepack.parse_resolution_schedule(text)  # the C++ checks, one wording
