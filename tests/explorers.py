"""Helpers the explorer tests share (a plain module: ``from explorers import set_controls``)."""


def set_controls(explorer, **values):
    """Set several controls of ``explorer``: "pattern" and "element_bytes" first, since the
    other controls apply to the pattern and element size they choose."""
    for key in ("pattern", "element_bytes"):
        if key in values:
            explorer.controls[key].value = values.pop(key)
    for key, v in values.items():
        explorer.controls[key].value = v
