"""The steps behind ``t2n.compile`` and ``t2n.export`` (:mod:`t2n.api` holds the two
entry points and their documentation):

* :mod:`.reading`: the model read by its frontend, with the names and dynamic axes of
  its inputs and outputs settled;
* :mod:`.stages`: lowering, passes and rendering, timed, and the artifact they make;
* :mod:`.early_write`: what ``export`` writes while the model compiles.
"""
