"""Explorers: a figure with controls, in a kernel (ipywidgets) and on the website (no kernel).

* :mod:`~norms.explore.state`: what an explorer shows, computed once: the layer for
  the controls' values, the numbers beside the figure, error messages;
* :mod:`~norms.explore.widgets`: the ipywidgets front end (Jupyter, Colab);
* :mod:`~norms.explore.web`: the static-site front end (data computed by ``norms``,
  one small script of ours).

Both front ends import :mod:`~norms.explore.state`; the website's never imports the
widgets.
"""

from ..lazy import lazy_submodules

# a submodule loads on first use: ``norms.explore.x`` works after ``import norms``
__getattr__ = lazy_submodules(__name__)
