"""Labels as given (folder names, CSV values, array ints) -> class indices of a model's head."""

from __future__ import annotations

import numpy as np


def label_indices(raw: list[str], num_classes: int, class_names: list[str] | None, where: str) -> np.ndarray:
    """Class index of every raw label, checked against the head; ValueError with one line otherwise.

    A label is looked up among the model's class names (HF id2label) when it has them; an
    integer label is the index itself; other names are numbered in sorted order, as
    torchvision's ImageFolder does.
    """
    if num_classes == 0:
        raise ValueError(f"{where}: labels given, but the model has no classification head")
    distinct = sorted(set(raw))
    if class_names is not None and all(n in class_names for n in distinct):
        table = {n: class_names.index(n) for n in distinct}
    elif all(_is_int(n) for n in distinct):
        table = {n: int(n) for n in distinct}
    elif class_names is not None:
        unknown = [n for n in distinct if n not in class_names]
        raise ValueError(
            f"{where}: labels do not match the head's classes: {', '.join(map(repr, unknown[:3]))} "
            f"{'is' if len(unknown) == 1 else 'are'} not among the model's {num_classes} class names"
        )
    else:
        table = {n: i for i, n in enumerate(distinct)}
    bad = sorted({(n, table[n]) for n in distinct if not 0 <= table[n] < num_classes}, key=lambda t: t[1])
    if bad:
        name, index = bad[-1]
        raise ValueError(
            f"{where}: labels do not match the head's {num_classes} classes: label {name!r} would be "
            f"class {index} ({len(distinct)} distinct labels)"
        )
    return np.asarray([table[n] for n in raw], dtype=np.int64)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


__all__ = ["label_indices"]
