"""The steps behind ``t2n.compile`` and ``t2n.export``, given their checked options
(:class:`t2n.options.CompileOptions`; :mod:`t2n.api` holds the two entry points and their
documentation):

* :mod:`.compile` / :mod:`.export`: the steps in order (``compile_model``, ``export_model``),
  which every entry point runs once it has made its options;
* :mod:`.reading`: the model read by its frontend, with the names and dynamic axes of
  its inputs and outputs settled;
* :mod:`.stages`: lowering, passes and rendering, timed, and the artifact they make;
* :mod:`.early_write`: what ``export`` writes while the model compiles.
"""
